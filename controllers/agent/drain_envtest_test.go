// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build integration

package agent

import (
	"context"
	"errors"
	"sync/atomic"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
	"github.com/numapref/numapref/controllers/internal/runnable"
	"github.com/numapref/numapref/internal/nodeagent/ledger"
)

// countingDrainer counts the engine's drains.
type countingDrainer struct{ calls atomic.Int32 }

func (d *countingDrainer) Drain() int { d.calls.Add(1); return 0 }

var _ = Describe("The drain watch", func() {
	ctx := context.Background()

	// agentDaemonSet makes a DaemonSet and a pod it owns, as the DaemonSet controller would.
	agentDaemonSet := func(ns string) (*appsv1.DaemonSet, *corev1.Pod) {
		GinkgoHelper()
		labels := map[string]string{"app": "agent"}
		ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "numapref-agent"},
			Spec: appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "agent", Image: "numapref"}}}}}}
		Expect(env.Client.Create(ctx, ds)).To(Succeed())
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "numapref-agent-x", Labels: labels,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: ds.Name, UID: ds.UID, Controller: ptr.To(true)}}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "agent", Image: "numapref"}}}}
		Expect(env.Client.Create(ctx, pod)).To(Succeed())
		return ds, pod
	}
	// startWatch runs a manager with the drain watch of pod; stop stops it as SIGTERM would.
	startWatch := func(pod *corev1.Pod, engine drainer, drained *atomic.Int32) (w *drainWatch, stop func()) {
		GinkgoHelper()
		mgr, err := ctrl.NewManager(env.Config, ctrl.Options{Scheme: env.Scheme, Metrics: metricsserver.Options{BindAddress: "0"}})
		Expect(err).NotTo(HaveOccurred())
		w = newDrainWatch(mgr, engine, DrainOptions{Pod: types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name},
			Drained: func() { drained.Add(1) }})
		Expect(mgr.Add(runnable.NodeLocal(w.run))).To(Succeed())
		stop, _ = env.RunManager(mgr)
		return w, stop
	}
	seen := func(w *drainWatch) string { v, _ := w.seen.Load().(string); return v }

	It("never drains on a rolling update or a restart, and drains when the DaemonSet is deleted", func() {
		ns := env.NewNamespace(ctx)
		ds, pod := agentDaemonSet(ns)
		engine, drained := &countingDrainer{}, &atomic.Int32{}
		w, stop := startWatch(pod, engine, drained)
		Eventually(func() string { return seen(w) }).Should(Equal(ds.ResourceVersion), "the watch sees the DaemonSet")

		// A rolling update: the template changes.
		ds.Spec.Template.Annotations = map[string]string{"restartedAt": "now"}
		Expect(env.Client.Update(ctx, ds)).To(Succeed())
		Eventually(func() string { return seen(w) }).Should(Equal(ds.ResourceVersion), "the watch sees the update")
		Expect(engine.calls.Load()).To(BeZero(), "a rolling update drained")

		// A plain restart: the agent is stopped while its DaemonSet stays.
		stop()
		Expect(engine.calls.Load()).To(BeZero(), "a restart drained")

		// The next agent sees the DaemonSet deleted.
		w, _ = startWatch(pod, engine, drained)
		Eventually(func() string { return seen(w) }).Should(Equal(ds.ResourceVersion))
		Expect(env.Client.Delete(ctx, ds)).To(Succeed())
		Eventually(engine.calls.Load).Should(Equal(int32(1)), "the deletion drained")
		Eventually(drained.Load).Should(Equal(int32(1)), "the state is removed after a drain that left nothing")
	})

	It("drains when the agent starts after its DaemonSet was deleted", func() {
		ns := env.NewNamespace(ctx)
		ds, pod := agentDaemonSet(ns)
		Expect(env.Client.Delete(ctx, ds)).To(Succeed())
		engine, drained := &countingDrainer{}, &atomic.Int32{}
		startWatch(pod, engine, drained)
		Eventually(engine.calls.Load).Should(Equal(int32(1)))
	})

	It("does not drain when the DaemonSet is deleted with its pods orphaned", func() {
		ns := env.NewNamespace(ctx)
		ds, pod := agentDaemonSet(ns)
		engine, drained := &countingDrainer{}, &atomic.Int32{}
		w, _ := startWatch(pod, engine, drained)
		Eventually(func() string { return seen(w) }).Should(Equal(ds.ResourceVersion))
		// envtest runs no garbage collector: the orphan finalizer stays until removed here.
		Expect(env.Client.Delete(ctx, ds, client.PropagationPolicy(metav1.DeletePropagationOrphan))).To(Succeed())
		Eventually(w.orphaned.Load).Should(BeTrue())
		Expect(engine.calls.Load()).To(BeZero())
	})
})

var _ = Describe("A damaged ledger", func() {
	ctx := context.Background()

	It("gives the Node a LedgerDamaged Warning and counts in the node's report", func() {
		opts := testAgentOptions
		opts.LedgerDamaged = errors.Join(ledger.ErrDamaged, errors.New("checksum mismatch"))
		startAgent("node-ledger", newScriptedEngine(nil), withOptions(opts))
		Eventually(func(g Gomega) {
			rep := &numav1.NumaNodeReport{}
			g.Expect(env.Client.Get(ctx, client.ObjectKey{Name: "node-ledger"}, rep)).To(Succeed())
			g.Expect(rep.Status.LedgerDamaged).To(Equal(int32(1)))
		}).Should(Succeed())
		Eventually(func(g Gomega) {
			var list eventsv1.EventList
			g.Expect(env.Client.List(ctx, &list)).To(Succeed())
			var notes []string
			for _, e := range list.Items {
				if e.Regarding.Kind == "Node" && e.Regarding.Name == "node-ledger" && e.Reason == numav1.ReasonLedgerDamaged {
					g.Expect(e.Type).To(Equal(corev1.EventTypeWarning))
					notes = append(notes, e.Note)
				}
			}
			g.Expect(notes).To(ConsistOf(ContainSubstring("checksum mismatch")))
		}).Should(Succeed())
	})
})

// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build integration

package agent

import (
	"context"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
	"github.com/numapref/numapref/controllers/internal/runnable"
)

// stubbornDrainer leaves entries the first time it drains, none after.
type stubbornDrainer struct{ calls atomic.Int32 }

func (d *stubbornDrainer) Drain() int {
	if d.calls.Add(1) == 1 {
		return 2
	}
	return 0
}

var _ = Describe("The drain's word in the node's report", func() {
	ctx := context.Background()

	It("says UndoIncomplete while values remain, then Drained, naming the DaemonSet; a new agent takes it away", func() {
		ns := env.NewNamespace(ctx)
		const node = "drain-report-node"
		env.EnsureNode(node)
		daemonSet := func(name string) (*appsv1.DaemonSet, *corev1.Pod) {
			labels := map[string]string{"app": name}
			ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
				Spec: appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: labels},
					Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
						Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "agent", Image: "numapref"}}}}}}
			Expect(env.Client.Create(ctx, ds)).To(Succeed())
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-x", Labels: labels,
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: ds.Name, UID: ds.UID, Controller: ptr.To(true)}}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "agent", Image: "numapref"}}}}
			Expect(env.Client.Create(ctx, pod)).To(Succeed())
			return ds, pod
		}
		start := func(pod *corev1.Pod, engine drainer) {
			mgr, err := ctrl.NewManager(env.Config, ctrl.Options{Scheme: env.Scheme, Metrics: metricsserver.Options{BindAddress: "0"}})
			Expect(err).NotTo(HaveOccurred())
			w := newDrainWatch(mgr, engine, DrainOptions{Pod: types.NamespacedName{Namespace: ns, Name: pod.Name}, Node: node, Retry: time.Second})
			Expect(mgr.Add(runnable.NodeLocal(w.run))).To(Succeed())
			env.RunManager(mgr)
		}
		drained := func(g Gomega) *metav1.Condition {
			var rep numav1.NumaNodeReport
			g.Expect(env.Client.Get(ctx, client.ObjectKey{Name: node}, &rep)).To(Succeed())
			return meta.FindStatusCondition(rep.Status.Conditions, numav1.ConditionDrained)
		}
		DeferCleanup(func() {
			_ = env.Client.Delete(ctx, &numav1.NumaNodeReport{ObjectMeta: metav1.ObjectMeta{Name: node}})
		})

		ds, pod := daemonSet("agent-one")
		start(pod, &stubbornDrainer{})
		Expect(env.Client.Delete(ctx, ds)).To(Succeed())
		var sawIncomplete atomic.Bool
		Eventually(func(g Gomega) {
			c := drained(g)
			g.Expect(c).NotTo(BeNil())
			if c.Reason == numav1.ReasonUndoIncomplete {
				sawIncomplete.Store(true)
				g.Expect(c.Message).To(ContainSubstring("2 containers"))
			}
			g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
			g.Expect(c.Reason).To(Equal(numav1.ReasonDrained))
			g.Expect(c.Message).To(ContainSubstring(string(ds.UID)))
		}).Should(Succeed())
		Expect(sawIncomplete.Load()).To(BeTrue(), "the first drain, which left entries, said so")

		_, pod2 := daemonSet("agent-two")
		start(pod2, &countingDrainer{})
		Eventually(func(g Gomega) { g.Expect(drained(g)).To(BeNil()) }).Should(Succeed(), "a new agent of the node takes the word away")
	})
})

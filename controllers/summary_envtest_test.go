//go:build integration

package controllers

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
	"github.com/numapref/numapref/internal/nodeagent"
	"github.com/numapref/numapref/internal/testutil/builders"
)

// startSummarizer runs the summarizer alone, as the elected agent would, until stop.
func startSummarizer() (stop func()) {
	GinkgoHelper()
	return startSummarizerWith(cfg)
}

// startSummarizerWith is startSummarizer through c (the summarizer's own identity, say).
func startSummarizerWith(c *rest.Config) (stop func()) {
	GinkgoHelper()
	mgr, err := ctrl.NewManager(c, ctrl.Options{
		Scheme: scheme, Metrics: metricsserver.Options{BindAddress: "0"},
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	Expect(err).NotTo(HaveOccurred())
	Expect(SetupSummary(mgr, testSummaryOptions)).To(Succeed())
	return runManager(mgr)
}

var _ = Describe("Summarizer", func() {
	ctx := context.Background()

	It("converges when it restarts in the middle of a rollout", func() {
		ns := newNamespace(ctx)
		var tasks atomic.Int32
		tasks.Store(2)
		engines := map[string]*scriptedEngine{}
		for i := range 3 {
			node := fmt.Sprintf("sum-%d", i)
			engines[node] = newScriptedEngine(func(d nodeagent.Desire) nodeagent.ContainerResult {
				return nodeagent.ContainerResult{Desire: d, Reason: numav1.ReasonApplied, Tasks: int(tasks.Load())}
			})
			startAgent(node, engines[node])
		}
		Expect(k8sClient.Create(ctx, builders.MakePreference(ns, "pref").Selector("app", "roll").Node(0).Obj())).To(Succeed())
		stop := startSummarizer()
		createRunning(ctx, builders.MakePod(ns, "r-0").Node("sum-0").Label("app", "roll").Containers("main").Obj())
		Eventually(func(g Gomega) {
			g.Expect(getPreference(ctx, ns, "pref")(g).Status.Summary).To(Equal(numav1.Summary{Nodes: 1, Pods: 1, Containers: 1, Tasks: 2}))
		}).Should(Succeed())

		// The summarizer goes away; the rollout goes on, and the tasks churn.
		stop()
		createRunning(ctx, builders.MakePod(ns, "r-1").Node("sum-1").Label("app", "roll").Containers("main").Obj())
		createRunning(ctx, builders.MakePod(ns, "r-2").Node("sum-2").Label("app", "roll").Containers("main").Obj())
		tasks.Store(3)
		for _, e := range engines {
			e.changes <- struct{}{}
		}
		Eventually(func(g Gomega) {
			for i := range 3 {
				g.Expect(nodeEntry(g, fmt.Sprintf("sum-%d", i), ns, "pref")).To(Equal(entry{Pods: 1, Containers: 1, Tasks: 3}))
			}
		}).Should(Succeed())
		Consistently(func(g Gomega) {
			g.Expect(getPreference(ctx, ns, "pref")(g).Status.Summary.Nodes).To(Equal(int32(1)), "nobody summarizes")
		}, "500ms").Should(Succeed())

		// A new summarizer knows nothing of the old one's bursts, and still converges.
		startSummarizer()
		Eventually(func(g Gomega) {
			p := getPreference(ctx, ns, "pref")(g)
			g.Expect(p.Status.Summary).To(Equal(numav1.Summary{Nodes: 3, Pods: 3, Containers: 3, Tasks: 9}))
			g.Expect(condition(p, numav1.ConditionReady).Status).To(BeEquivalentTo("True"))
		}).Should(Succeed())
	})
})

var _ = Describe("Summarizer lease", func() {
	ctx := context.Background()

	It("loses its lease without stopping the node agent, and summarizes again once it wins it back", func() {
		ns := newNamespace(ctx)
		engine := newScriptedEngine(nil)
		mgr := startAgent("lease-node", engine).mgr
		election := ElectionOptions{Namespace: ns, ID: "numapref-summary",
			LeaseDuration: 2 * time.Second, RenewDeadline: time.Second, RetryPeriod: 200 * time.Millisecond}
		Expect(mgr.Add(RunSummarizer(cfg, scheme, election, testSummaryOptions))).To(Succeed())

		Expect(k8sClient.Create(ctx, builders.MakePreference(ns, "pref").Selector("app", "lease").Node(0).Obj())).To(Succeed())
		createRunning(ctx, builders.MakePod(ns, "l-0").Node("lease-node").Label("app", "lease").Containers("main").Obj())
		Eventually(func(g Gomega) {
			g.Expect(getPreference(ctx, ns, "pref")(g).Status.Summary.Pods).To(Equal(int32(1)))
		}).Should(Succeed())

		// Someone else takes the lease for a while: the summarizer cannot renew, and stops.
		// The holder renews every 200 ms, so the thief's update may lose a race on the
		// resourceVersion: it reads again and retries, as any contender would.
		thief, hold := "thief", int32(4)
		Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
			lease := &coordinationv1.Lease{}
			if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "numapref-summary"}, lease); err != nil {
				return err
			}
			lease.Spec.HolderIdentity, lease.Spec.LeaseDurationSeconds = &thief, &hold
			lease.Spec.RenewTime = &metav1.MicroTime{Time: time.Now()}
			return k8sClient.Update(ctx, lease)
		})).To(Succeed())

		// Meanwhile the node agent works on: a new pod is reported in its node's report.
		createRunning(ctx, builders.MakePod(ns, "l-1").Node("lease-node").Label("app", "lease").Containers("main").Obj())
		Eventually(func(g Gomega) {
			g.Expect(nodeEntry(g, "lease-node", ns, "pref").Pods).To(Equal(int32(2)))
		}).Should(Succeed())

		// The thief never renews: the summarizer wins the lease back and catches up.
		Eventually(func(g Gomega) {
			g.Expect(getPreference(ctx, ns, "pref")(g).Status.Summary.Pods).To(Equal(int32(2)))
			l := &coordinationv1.Lease{}
			g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "numapref-summary"}, l)).To(Succeed())
			g.Expect(*l.Spec.HolderIdentity).NotTo(Equal(thief))
		}).WithTimeout(time.Minute).Should(Succeed())
	})
})

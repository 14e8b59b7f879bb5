// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build integration

package agent

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/numapref/numapref/controllers/summarizer"
	"github.com/numapref/numapref/internal/testutil/builders"
)

// An agent run with -leader-elect runs the summarizer in its own process
// (summarizer.RunSummarizer): the summarizer's lease must never stop the node agent.
var _ = Describe("Summarizer lease", func() {
	ctx := context.Background()

	It("loses its lease without stopping the node agent, and summarizes again once it wins it back", func() {
		ns := env.NewNamespace(ctx)
		engine := newScriptedEngine(nil)
		mgr := startAgent("lease-node", engine).mgr
		election := summarizer.ElectionOptions{Namespace: ns, ID: "numapref-summary",
			LeaseDuration: 2 * time.Second, RenewDeadline: time.Second, RetryPeriod: 200 * time.Millisecond}
		Expect(mgr.Add(summarizer.RunSummarizer(env.Config, env.Scheme, election, testSummaryOptions))).To(Succeed())

		Expect(env.Client.Create(ctx, builders.MakePreference(ns, "pref").Selector("app", "lease").Node(0).Obj())).To(Succeed())
		createRunning(ctx, builders.MakePod(ns, "l-0").Node("lease-node").Label("app", "lease").Containers("main").Obj())
		Eventually(func(g Gomega) {
			g.Expect(env.Preference(ctx, ns, "pref")(g).Status.Summary.Pods).To(Equal(int32(1)))
		}).Should(Succeed())

		// Someone else takes the lease for a while: the summarizer cannot renew, and stops.
		// The holder renews every 200 ms, so the thief's update may lose a race on the
		// resourceVersion: it reads again and retries, as any contender would.
		thief, hold := "thief", int32(4)
		Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
			lease := &coordinationv1.Lease{}
			if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "numapref-summary"}, lease); err != nil {
				return err
			}
			lease.Spec.HolderIdentity, lease.Spec.LeaseDurationSeconds = &thief, &hold
			lease.Spec.RenewTime = &metav1.MicroTime{Time: time.Now()}
			return env.Client.Update(ctx, lease)
		})).To(Succeed())

		// Meanwhile the node agent works on: a new pod is reported in its node's report.
		createRunning(ctx, builders.MakePod(ns, "l-1").Node("lease-node").Label("app", "lease").Containers("main").Obj())
		Eventually(func(g Gomega) {
			g.Expect(nodeEntry(g, "lease-node", ns, "pref").Pods).To(Equal(int32(2)))
		}).Should(Succeed())

		// The thief never renews: the summarizer wins the lease back and catches up.
		Eventually(func(g Gomega) {
			g.Expect(env.Preference(ctx, ns, "pref")(g).Status.Summary.Pods).To(Equal(int32(2)))
			l := &coordinationv1.Lease{}
			g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "numapref-summary"}, l)).To(Succeed())
			g.Expect(*l.Spec.HolderIdentity).NotTo(Equal(thief))
		}).WithTimeout(time.Minute).Should(Succeed())
	})
})

// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build integration

package summarizer

import (
	"context"
	"fmt"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
	"github.com/numapref/numapref/internal/testutil/builders"
	"github.com/numapref/numapref/internal/testutil/ctrltest"
)

var _ = Describe("Summarizer", func() {
	ctx := context.Background()

	It("converges when it restarts in the middle of a rollout", func() {
		ns := env.NewNamespace(ctx)
		Expect(env.Client.Create(ctx, builders.MakePreference(ns, "pref").Selector("app", "roll").Node(0).Obj())).To(Succeed())
		// One pod of the rollout on a node, its container placed on tasks tasks.
		placed := func(tasks int32) numav1.PreferenceReport {
			return numav1.PreferenceReport{Namespace: ns, Name: "pref", Generation: 1, Pods: 1, Containers: 1, Tasks: tasks}
		}
		stop := startSummarizer()
		writeReport(ctx, "sum-0", placed(2))
		Eventually(func(g Gomega) {
			g.Expect(env.Preference(ctx, ns, "pref")(g).Status.Summary).To(Equal(numav1.Summary{Nodes: 1, Pods: 1, Containers: 1, Tasks: 2}))
		}).Should(Succeed())

		// The summarizer goes away; the rollout goes on, and the tasks churn.
		stop()
		for i := range 3 {
			writeReport(ctx, fmt.Sprintf("sum-%d", i), placed(3))
		}
		Consistently(func(g Gomega) {
			g.Expect(env.Preference(ctx, ns, "pref")(g).Status.Summary.Nodes).To(Equal(int32(1)), "nobody summarizes")
		}, "500ms").Should(Succeed())

		// A new summarizer knows nothing of the old one's bursts, and still converges.
		startSummarizer()
		Eventually(func(g Gomega) {
			p := env.Preference(ctx, ns, "pref")(g)
			g.Expect(p.Status.Summary).To(Equal(numav1.Summary{Nodes: 3, Pods: 3, Containers: 3, Tasks: 9}))
			g.Expect(ctrltest.Condition(p, numav1.ConditionReady).Status).To(BeEquivalentTo("True"))
		}).Should(Succeed())
	})
})

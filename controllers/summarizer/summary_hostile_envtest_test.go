// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build integration

package summarizer

import (
	"context"
	"math"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
	"github.com/numapref/numapref/internal/testutil/builders"
	"github.com/numapref/numapref/internal/testutil/ctrltest"
)

var _ = Describe("Summarizer and a hostile report", func() {
	ctx := context.Background()

	It("adds up none of it, names its node, and keeps every status updating", func() {
		ns := env.NewNamespace(ctx)
		startSummarizer()
		// The good node runs a pod of each preference, its container placed on tasks tasks.
		good := func(tasks int32) []numav1.PreferenceReport {
			var out []numav1.PreferenceReport
			for _, name := range []string{"named", "other"} {
				out = append(out, numav1.PreferenceReport{Namespace: ns, Name: name, Generation: 1, Pods: 1, Containers: 1, Tasks: tasks})
			}
			return out
		}
		for _, name := range []string{"named", "other"} {
			Expect(env.Client.Create(ctx, builders.MakePreference(ns, name).Selector("app", name).Node(0).Obj())).To(Succeed())
		}
		writeReport(ctx, "hostile-good", good(2)...)

		// Node A's agent writes what the CRD lets through: a reason that is no condition
		// reason for one preference, counts of 2^31-1 for the other.
		hostile := &numav1.NumaNodeReport{ObjectMeta: metav1.ObjectMeta{Name: "hostile-a"},
			Status: numav1.NumaNodeReportStatus{Preferences: []numav1.PreferenceReport{
				{Namespace: ns, Name: "named", Generation: 1, Pods: 1, Containers: 1, Tasks: 1,
					Skipped: []numav1.ReasonCount{{Reason: "x y", Count: 5}}},
				{Namespace: ns, Name: "other", Generation: 1, Pods: math.MaxInt32, Containers: math.MaxInt32, Tasks: math.MaxInt32,
					Skipped: []numav1.ReasonCount{{Reason: numav1.ReasonKernelUnsupported, Count: math.MaxInt32}}},
			}}}
		Expect(env.Client.Create(ctx, hostile)).To(Succeed(), "the CRD accepts the hostile report")
		DeferCleanup(func() { Expect(client.IgnoreNotFound(env.Client.Delete(ctx, hostile))).To(Succeed()) })

		invalidA := numav1.NodeProblem{NodeName: "hostile-a", Reason: numav1.ReasonInvalidReport, Count: 1}
		expectCounted := func(tasks int32) {
			GinkgoHelper()
			Eventually(func(g Gomega) {
				for _, name := range []string{"named", "other"} {
					p := env.Preference(ctx, ns, name)(g)
					g.Expect(p.Status.Summary).To(Equal(numav1.Summary{Nodes: 1, Pods: 1, Containers: 1, Tasks: tasks}), name)
					g.Expect(p.Status.ProblemNodes).To(Equal([]numav1.NodeProblem{invalidA}), name)
					g.Expect(ctrltest.Condition(p, numav1.ConditionDegraded).Reason).To(Equal(numav1.ReasonInvalidReport), name)
					g.Expect(ctrltest.Condition(p, numav1.ConditionReady).Reason).To(Equal(numav1.ReasonPartiallyApplied), name)
				}
			}).Should(Succeed())
		}
		expectCounted(2)

		// The good node's counts change: both statuses follow them.
		writeReport(ctx, "hostile-good", good(5)...)
		expectCounted(5)
	})
})

// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build integration

package agent

import (
	"context"
	"fmt"
	"sync/atomic"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	eventsv1 "k8s.io/api/events/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
	"github.com/numapref/numapref/internal/nodeagent/desire"
	"github.com/numapref/numapref/internal/nodeagent/plan"
	"github.com/numapref/numapref/internal/testutil/builders"
)

var _ = Describe("Pod Events", func() {
	ctx := context.Background()

	It("come once per pod and reason, however the counts churn", func() {
		// Every pass reports new task counts: "app" is applied to a growing number of
		// tasks, "log" is refused for a growing number. Neither may bring a new Event.
		var pass atomic.Int32
		engine := newScriptedEngine(func(d desire.Desire) plan.Result {
			n := int(pass.Load())
			if d.Container == "log" {
				return plan.Result{Desire: d, Reason: numav1.ReasonKernelError, Tasks: 1,
					Failed: map[string]int{numav1.ReasonKernelError: n}, Message: fmt.Sprintf("the kernel refused %d tasks", n)}
			}
			return plan.Result{Desire: d, Reason: numav1.ReasonApplied, Tasks: 3 + n}
		})
		startAgent("node-a", engine)
		ns := env.NewNamespace(ctx)
		ann := map[string]string{numav1.AnnotationPreferredNode: "0"}
		pod := createRunning(ctx, builders.MakePod(ns, "churn").Node("node-a").Annotations(ann).Containers("app", "log", "side").Obj())
		expectPodEvent(ctx, pod, numav1.ReasonApplied, "prefers NUMA node 0 (pod annotation): containers app, side")
		expectPodEvent(ctx, pod, numav1.ReasonKernelError, "container log: the kernel refused 0 tasks")

		for i := 1; i <= 5; i++ {
			pass.Store(int32(i))
			calls := engine.calls.Load()
			engine.changes <- struct{}{} // a pass with new results
			Eventually(engine.calls.Load).Should(BeNumerically(">", calls))
		}
		Consistently(func(g Gomega) {
			var list eventsv1.EventList
			g.Expect(env.Client.List(ctx, &list, client.InNamespace(ns))).To(Succeed())
			byReason := map[string][]string{}
			for _, e := range list.Items {
				if e.Regarding.UID == pod.UID {
					byReason[e.Reason] = append(byReason[e.Reason], e.Note)
				}
			}
			g.Expect(byReason[numav1.ReasonApplied]).To(HaveLen(1), "one Applied Event for the pod's two applied containers")
			g.Expect(byReason[numav1.ReasonKernelError]).To(ConsistOf(ContainSubstring("refused 0 tasks")), "the first message only")
		}, "2s", "200ms").Should(Succeed())
	})
})

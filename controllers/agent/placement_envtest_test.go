// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build integration

package agent

import (
	"context"
	"fmt"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
	"github.com/numapref/numapref/internal/testutil/builders"
	"github.com/numapref/numapref/internal/testutil/ctrltest"
	"github.com/numapref/numapref/internal/testutil/hostlab"
)

// Spread with the whole agent: the real engine and controllers on real cgroups and
// processes, the emulated kernel on a fixture sysfs with two and four NUMA nodes.
var _ = Describe("Spread with the real engine", Ordered, func() {
	ctx := context.Background()
	spread := func(ns string) *numav1.NumaPreference {
		return builders.MakePreference(ns, "spread").Selector("app", "spread").Mode(numav1.PlacementModeSpread).Obj()
	}

	for _, numaNodes := range []int{2, 4} {
		It(fmt.Sprintf("spreads pods over %d NUMA nodes, places the next on the lightest, and moves nobody when one leaves", numaNodes), func() {
			sysRoot, err := hostlab.FakeNUMASysfs(GinkgoT().TempDir(), numaNodes, 2)
			Expect(err).NotTo(HaveOccurred())
			node := fmt.Sprintf("node-spread-%d", numaNodes)
			lab, emu := startRealAgentOn(env.Config, node, sysRoot)
			ns := env.NewNamespace(ctx)
			Expect(env.Client.Create(ctx, spread(ns))).To(Succeed())

			pods := map[string]*hostlab.Workload{}
			nodeOf := func(g Gomega, name string) int {
				vs := emulatedNodes(g, emu, pods[name].Pid())
				g.Expect(vs).NotTo(BeEmpty())
				g.Expect(vs).To(HaveEach(vs[0]), "all tasks of %s on one node", name)
				return vs[0]
			}
			names := []string{"s-0", "s-1", "s-2", "s-3"}
			for _, name := range names {
				pods[name] = startLabPod(ctx, lab, ns, node, name, map[string]string{"app": "spread"}, 2)
			}
			perNode := func(g Gomega) map[int]int {
				m := map[int]int{}
				for name := range pods {
					m[nodeOf(g, name)]++
				}
				return m
			}
			want := map[int]int{}
			for i := range numaNodes {
				want[i] = len(names) / numaNodes
			}
			Eventually(func(g Gomega) { g.Expect(perNode(g)).To(Equal(want)) }).Should(Succeed())
			placed := map[string]int{}
			for _, name := range names {
				placed[name] = nodeOf(Default, name)
			}

			// The report counts pods by chosen node; the preference is Ready.
			Eventually(func(g Gomega) {
				rep := &numav1.NumaNodeReport{}
				g.Expect(env.Client.Get(ctx, client.ObjectKey{Name: node}, rep)).To(Succeed())
				g.Expect(rep.Status.Preferences).To(HaveLen(1))
				var byNode []numav1.NodeCount
				for i := range numaNodes {
					byNode = append(byNode, numav1.NodeCount{Node: int32(i), Pods: int32(len(names) / numaNodes)})
				}
				g.Expect(rep.Status.Preferences[0].PodsByNode).To(Equal(byNode))
				g.Expect(ctrltest.Condition(env.Preference(ctx, ns, "spread")(g), numav1.ConditionReady).Status).To(Equal(metav1.ConditionTrue))
			}).Should(Succeed())

			// A fifth pod goes to the lighter node: all weigh the same, so the lowest id.
			pods["s-4"] = startLabPod(ctx, lab, ns, node, "s-4", map[string]string{"app": "spread"}, 2)
			Eventually(func(g Gomega) { g.Expect(nodeOf(g, "s-4")).To(Equal(0)) }).Should(Succeed())
			expectPodEvent(ctx, podNamed(ctx, ns, "s-4"), numav1.ReasonApplied,
				fmt.Sprintf("prefers NUMA node 0 (NumaPreference spread, Spread: %d of 5 pods on node 0)", len(names)/numaNodes+1))

			// One pod leaves: nobody moves.
			Expect(env.Client.Delete(ctx, podNamed(ctx, ns, "s-1"), client.GracePeriodSeconds(0))).To(Succeed())
			pods["s-1"].Stop()
			delete(pods, "s-1")
			Eventually(func(g Gomega) {
				rep := &numav1.NumaNodeReport{}
				g.Expect(env.Client.Get(ctx, client.ObjectKey{Name: node}, rep)).To(Succeed())
				g.Expect(rep.Status.Preferences).To(HaveLen(1))
				g.Expect(rep.Status.Preferences[0].Pods).To(Equal(int32(4)))
			}).Should(Succeed())
			Consistently(func(g Gomega) {
				for name, n := range placed {
					if _, ok := pods[name]; ok {
						g.Expect(nodeOf(g, name)).To(Equal(n), "%s moved", name)
					}
				}
				g.Expect(nodeOf(g, "s-4")).To(Equal(0))
			}, "1s").Should(Succeed())
		})
	}
})

// podNamed reads pod ns/name from the apiserver.
func podNamed(ctx context.Context, ns, name string) *corev1.Pod {
	GinkgoHelper()
	pod := &corev1.Pod{}
	Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, pod)).To(Succeed())
	return pod
}

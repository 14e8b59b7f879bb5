// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	certificatesv1 "k8s.io/api/certificates/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
	"github.com/numapref/numapref/controllers/agent"
)

// The specs that need several nodes, each with its own agent: E2E_PROVIDER=kind (a
// control plane and two workers, one of them with the cgroupfs driver). They are part of
// kind's suite only: the local node's suite does not hold them, so nothing is skipped
// there.
var _ = multiNodeSpecs()

func multiNodeSpecs() bool {
	if os.Getenv("E2E_PROVIDER") != "kind" {
		return false
	}
	return Describe("numapref on several nodes", Ordered, func() {
		const (
			mns = "e2e-multi"
			// The summarizer's --leader-election-lease-duration (the chart keeps the default).
			leaseDuration = 60 * time.Second
			leaseName     = "numapref-summary"
			summarizerSA  = release + "-summarizer" // the chart's full name is the release's, which holds the chart's name
		)
		var (
			cl    client.Client
			cfg   *rest.Config
			nodes []string
		)

		// readyByNode returns the ready pods of a component of the chart by node, once there
		// are want of them.
		readyByNode := func(ctx context.Context, component string, want int) map[string]corev1.Pod {
			GinkgoHelper()
			byNode := map[string]corev1.Pod{}
			Eventually(func(g Gomega) {
				var list corev1.PodList
				g.Expect(cl.List(ctx, &list, client.InNamespace(agentNamespace),
					client.MatchingLabels{"app.kubernetes.io/name": "numapref", "app.kubernetes.io/component": component})).To(Succeed())
				clear(byNode)
				for _, p := range list.Items {
					if p.DeletionTimestamp == nil && podReady(&p) {
						byNode[p.Spec.NodeName] = p
					}
				}
				g.Expect(byNode).To(HaveLen(want), "ready %s pods, each on a node of its own", component)
			}).WithContext(ctx).WithTimeout(2 * time.Minute).Should(Succeed())
			return byNode
		}
		// agents: a ready agent on every node.
		agents := func(ctx context.Context) map[string]corev1.Pod { return readyByNode(ctx, "agent", len(nodes)) }
		// summarizers: the summarizer's two replicas, one a worker (the host network's health
		// port keeps them apart).
		summarizers := func(ctx context.Context) map[string]corev1.Pod { return readyByNode(ctx, "summarizer", 2) }

		// place creates a workload pod on node and waits until every task of it prefers NUMA
		// node 0 there.
		place := func(ctx context.Context, node, name, app string) {
			GinkgoHelper()
			p := workloadPodOn(node, mns, name, map[string]string{"app": app}, nil, "app")
			p.Spec.TerminationGracePeriodSeconds = ptr(int64(1))
			Expect(cl.Create(ctx, p)).To(Succeed())
			id := containerIDs(ctx, cl, mns, name)["app"]
			Eventually(allPreferOn(ctx, node, id, 0, 9)).WithContext(ctx).WithTimeout(30*time.Second).Should(Succeed(), "pod %s on %s", name, node)
		}

		summaryPods := func(ctx context.Context, g Gomega, name string) int32 {
			np := &numav1.NumaPreference{}
			g.Expect(cl.Get(ctx, client.ObjectKey{Namespace: mns, Name: name}, np)).To(Succeed())
			return np.Status.Summary.Pods
		}

		BeforeAll(func(ctx SpecContext) {
			nodes = prov.nodes()
			if len(nodes) < 2 {
				Fail(fmt.Sprintf("the multi-node specs need several nodes, this cluster has %d (E2E_PROVIDER=kind has three)", len(nodes)))
			}
			var err error
			cfg, err = clientcmd.BuildConfigFromFlags("", kubeconfig)
			Expect(err).NotTo(HaveOccurred())
			cl = newClient(cfg)
			Expect(cl.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: mns}})).To(Succeed())
			// Every agent serves its own node's certificate, signed by the summarizer (the
			// chart's default).
			installAgent(ctx)
		}, NodeTimeout(4*time.Minute))

		AfterAll(func(ctx SpecContext) {
			if len(nodes) < 2 {
				return
			}
			_, _ = kubectl(ctx, "delete", "numapref", "--all", "-n", mns, "--wait=true")
			_, _ = kubectl(ctx, "delete", "namespace", mns, "--wait=true")
			uninstallAgent(ctx)
		}, NodeTimeout(3*time.Minute))

		It("runs an agent on every node, and each reports its own node and no other", func(ctx SpecContext) {
			agents(ctx)
			Eventually(func(g Gomega) {
				var reports numav1.NumaNodeReportList
				g.Expect(cl.List(ctx, &reports)).To(Succeed())
				var names []string
				for _, rep := range reports.Items {
					names = append(names, rep.Name)
					g.Expect(rep.OwnerReferences).To(ConsistOf(And(HaveField("Kind", "Node"), HaveField("Name", rep.Name))))
					g.Expect(rep.Status.KernelSupport).To(Equal("emulator"), rep.Name)
					if prov.nri() {
						// Every node's runtime serves NRI, the cgroupfs worker's too.
						g.Expect(rep.Status.NRI).To(Equal(numav1.NRIConnected), rep.Name)
					}
					// Only that node's agent ever wrote it.
					for _, m := range rep.ManagedFields {
						if strings.HasPrefix(m.Manager, "numapref-agent/") {
							g.Expect(m.Manager).To(Equal(agent.AgentFieldManager(rep.Name)))
						}
					}
				}
				g.Expect(names).To(ConsistOf(nodes))
				for _, n := range nodes {
					node := &corev1.Node{}
					g.Expect(cl.Get(ctx, client.ObjectKey{Name: n}, node)).To(Succeed())
					g.Expect(node.Labels).To(HaveKeyWithValue("numapref.io/kernel-support", "emulator"), n)
					if prov.nri() {
						g.Expect(node.Labels).To(HaveKeyWithValue("numapref.io/nri", "connected"), n)
					}
				}
			}).WithContext(ctx).WithTimeout(60 * time.Second).Should(Succeed())
			out, err := kubectl(ctx, "get", "numanodereports")
			Expect(err).NotTo(HaveOccurred(), out)
			logf("kubectl get numanodereports:\n%s", out)
		}, SpecTimeout(3*time.Minute))

		It("counts the pods of every node in one summary", func(ctx SpecContext) {
			start := time.Now()
			applyPreferenceIn(ctx, mns, "e2e-multi", "node: 0")
			for i, n := range nodes {
				place(ctx, n, fmt.Sprintf("multi-%d", i), "e2e-multi")
			}
			Eventually(func(g Gomega) {
				np := &numav1.NumaPreference{}
				g.Expect(cl.Get(ctx, client.ObjectKey{Namespace: mns, Name: "e2e-multi"}, np)).To(Succeed())
				g.Expect(np.Status.Summary.Pods).To(Equal(int32(len(nodes))))
				g.Expect(np.Status.Summary.Tasks).To(BeNumerically(">=", 9*len(nodes)))
				ready := meta.FindStatusCondition(np.Status.Conditions, numav1.ConditionReady)
				g.Expect(ready).NotTo(BeNil())
				g.Expect(ready.Status).To(Equal(metav1.ConditionTrue), ready.Message)
				for _, n := range nodes {
					rep := &numav1.NumaNodeReport{}
					g.Expect(cl.Get(ctx, client.ObjectKey{Name: n}, rep)).To(Succeed())
					e := reportEntry(rep, mns, "e2e-multi")
					g.Expect(e).NotTo(BeNil(), "the entry of %s", n)
					g.Expect(e.Pods).To(Equal(int32(1)), n)
				}
			}).WithContext(ctx).WithTimeout(60 * time.Second).Should(Succeed())
			logf("one pod on each of %d nodes placed and summed up in %s", len(nodes), time.Since(start).Round(time.Millisecond))
			out, err := kubectl(ctx, "get", "numapref", "-n", mns, "-o", "wide")
			Expect(err).NotTo(HaveOccurred(), out)
			logf("kubectl get numapref -n %s -o wide:\n%s", mns, out)
		}, SpecTimeout(4*time.Minute))

		It("moves the summary to another summarizer replica within the lease time when the leader's pod is deleted", func(ctx SpecContext) {
			byNode := summarizers(ctx)
			lease := &coordinationv1.Lease{}
			Expect(cl.Get(ctx, client.ObjectKey{Namespace: agentNamespace, Name: leaseName}, lease)).To(Succeed())
			Expect(lease.Spec.HolderIdentity).NotTo(BeNil())
			holder := *lease.Spec.HolderIdentity
			// controller-runtime's identity is <hostname>_<uuid>; on the host network the
			// hostname is the node's, and each node has one replica (their health port).
			leaderNode, _, _ := strings.Cut(holder, "_")
			leader, ok := byNode[leaderNode]
			Expect(ok).To(BeTrue(), "the lease holder %q is no summarizer of %v", holder, slices.Collect(maps.Keys(byNode)))
			other := nodes[0]
			if other == leaderNode {
				other = nodes[1]
			}
			// The leader releases its lease as its pod stops; the next holder is whichever
			// replica campaigns first: the other one, or the Deployment's new pod. Either is
			// another process, and either must take over well within the lease.
			start := time.Now()
			out, err := kubectl(ctx, "delete", "pod", "-n", agentNamespace, leader.Name, "--wait=false")
			Expect(err).NotTo(HaveOccurred(), out)
			Eventually(func(g Gomega) {
				l := &coordinationv1.Lease{}
				g.Expect(cl.Get(ctx, client.ObjectKey{Namespace: agentNamespace, Name: leaseName}, l)).To(Succeed())
				g.Expect(l.Spec.HolderIdentity).NotTo(BeNil())
				g.Expect(*l.Spec.HolderIdentity).NotTo(BeElementOf(holder, ""))
			}).WithContext(ctx).WithTimeout(leaseDuration).WithPolling(time.Second).Should(Succeed())
			moved := time.Since(start)
			// A change made after the leader went reaches the summary: the new leader writes it.
			place(ctx, other, "multi-after", "e2e-multi")
			Eventually(func(g Gomega) {
				g.Expect(summaryPods(ctx, g, "e2e-multi")).To(Equal(int32(len(nodes) + 1)))
			}).WithContext(ctx).WithTimeout(leaseDuration).Should(Succeed())
			l := &coordinationv1.Lease{}
			Expect(cl.Get(ctx, client.ObjectKey{Namespace: agentNamespace, Name: leaseName}, l)).To(Succeed())
			logf("summarizer leader %s (%s) deleted: lease taken by %s %s later (lease duration %s); a pod created after it counted %s after the deletion",
				leader.Name, leaderNode, *l.Spec.HolderIdentity, moved.Round(time.Millisecond), leaseDuration, time.Since(start).Round(time.Millisecond))
		}, SpecTimeout(4*time.Minute))

		It("gives no agent the right to write a preference's status or take the summary lease", func(ctx SpecContext) {
			pod := agents(ctx)[nodes[0]]
			// What the API server itself answers for the agents' ServiceAccount.
			for _, check := range [][]string{
				{"patch", "numapreferences.numa.numapref.io/e2e-multi", "--subresource=status", "-n", mns},
				{"update", "leases.coordination.k8s.io/" + leaseName, "-n", agentNamespace},
				{"create", "leases.coordination.k8s.io", "-n", agentNamespace},
			} {
				out, _ := kubectl(ctx, append([]string{"auth", "can-i", "--as=system:serviceaccount:" + agentNamespace + ":" + pod.Spec.ServiceAccountName}, check...)...)
				Expect(strings.TrimSpace(out)).To(Equal("no"), "agent may %v", check)
			}
			out, err := kubectl(ctx, "auth", "can-i", "--as=system:serviceaccount:"+agentNamespace+":"+summarizerSA,
				"patch", "numapreferences.numa.numapref.io/e2e-multi", "--subresource=status", "-n", mns)
			Expect(strings.TrimSpace(out)).To(Equal("yes"), "the summarizer may not write status: %v", err)
		}, SpecTimeout(time.Minute))

		It("refuses an agent's write to another node's report", func(ctx SpecContext) {
			byNode := agents(ctx)
			own, foreign := nodes[0], nodes[1]
			pod := byNode[own]
			// A token bound to the agent's pod, as kubelet gives it: it names the pod's node.
			out, err := kubectl(ctx, "create", "token", pod.Spec.ServiceAccountName, "-n", agentNamespace,
				"--bound-object-kind=Pod", "--bound-object-name="+pod.Name, "--bound-object-uid="+string(pod.UID), "--duration=10m")
			Expect(err).NotTo(HaveOccurred(), out)
			agentCfg := rest.AnonymousClientConfig(cfg)
			agentCfg.BearerToken = strings.TrimSpace(out)
			agent := newClient(agentCfg)
			patch := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"e2e.numapref.io/probe":"x"}}}`))

			// Its own node's report: allowed (dry run, nothing changes).
			Expect(agent.Patch(ctx, &numav1.NumaNodeReport{ObjectMeta: metav1.ObjectMeta{Name: own}}, patch, client.DryRunAll)).To(Succeed())
			// Another node's: refused by the node-restriction policy.
			err = agent.Patch(ctx, &numav1.NumaNodeReport{ObjectMeta: metav1.ObjectMeta{Name: foreign}}, patch, client.DryRunAll)
			Expect(err).To(HaveOccurred())
			Expect(apierrors.IsForbidden(err) || apierrors.IsInvalid(err)).To(BeTrue(), "%v", err)
			Expect(err.Error()).To(ContainSubstring(fmt.Sprintf("the numapref agent of node %s may not write NumaNodeReport %s", own, foreign)))
			logf("the agent of %s writing the report of %s: %v", own, foreign, err)
			// Nor another node's labels.
			err = agent.Patch(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: foreign}},
				client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"numapref.io/numa-nodes":"9"}}}`)), client.DryRunAll)
			Expect(err).To(HaveOccurred())
			Expect(err.Error()).To(ContainSubstring(fmt.Sprintf("may not write Node %s", foreign)))
		}, SpecTimeout(3*time.Minute))

		It("serves each node's own certificate: kubectl numapref refuses node A's agent for a pod of node B", func(ctx SpecContext) {
			byNode := agents(ctx)
			a, b := nodes[0], nodes[1]
			// An inspector allowed to read the pods of this namespace through the agents.
			makeInspector(ctx, mns, "e2e-multi-inspector")
			inspect := func(pod string, extra ...string) (string, error) {
				return run(ctx, "", plugin, append([]string{"inspect", mns + "/" + pod, "--token-service-account", mns + "/e2e-inspector", "-o", "json"}, extra...)...)
			}
			// Each agent's certificate was issued through the CSR API for its node: a request
			// of the agents' ServiceAccount with that node's claim, approved and signed.
			Eventually(func(g Gomega) {
				var list certificatesv1.CertificateSigningRequestList
				g.Expect(cl.List(ctx, &list)).To(Succeed())
				issued := map[string]bool{}
				for _, csr := range list.Items {
					if csr.Spec.SignerName != "numapref.io/agent-serving" || len(csr.Status.Certificate) == 0 {
						continue
					}
					g.Expect(csr.Spec.Username).To(HavePrefix("system:serviceaccount:"+agentNamespace+":"), csr.Name)
					for _, n := range csr.Spec.Extra["authentication.kubernetes.io/node-name"] {
						issued[n] = true
					}
				}
				for _, n := range nodes {
					g.Expect(issued).To(HaveKey(n), "a node certificate issued for %s", n)
				}
			}).WithContext(ctx).WithTimeout(time.Minute).Should(Succeed())
			// Each node's pod, through its own node's agent: verified for that node.
			for _, n := range []string{a, b} {
				Eventually(func() error {
					_, err := inspect("multi-" + strconv.Itoa(slices.Index(nodes, n)))
					return err
				}).WithContext(ctx).WithTimeout(30*time.Second).WithPolling(time.Second).Should(Succeed(), "inspect through the agent of %s", n)
			}
			// Node B's pod asked of node A's agent (its address given): A's certificate is
			// refused, before any token is sent.
			out, err := inspect("multi-"+strconv.Itoa(slices.Index(nodes, b)), "--agent-url", "https://"+byNode[a].Status.HostIP+":8443")
			Expect(err).To(HaveOccurred(), out)
			Expect(out).To(ContainSubstring("not its node's"))
			logf("node %s's agent asked about a pod of %s: %s", a, b, strings.TrimSpace(out))
		}, SpecTimeout(3*time.Minute))

		It("makes Spread decisions per node: each node spreads its own pods", func(ctx SpecContext) {
			// Two pods on one worker, one on the other: each agent counts only its node's pods.
			counts := map[string]int{nodes[0]: 2, nodes[1]: 1}
			applyPreferenceIn(ctx, mns, "e2e-multi-spread", "mode: Spread")
			podsOf := map[string][]string{}
			for _, n := range nodes[:2] {
				for i := range counts[n] {
					name := fmt.Sprintf("spread-%s-%d", n, i)
					place(ctx, n, name, "e2e-multi-spread")
					podsOf[n] = append(podsOf[n], name)
				}
			}
			Eventually(func(g Gomega) {
				g.Expect(summaryPods(ctx, g, "e2e-multi-spread")).To(Equal(int32(3)))
				for n, want := range counts {
					rep := &numav1.NumaNodeReport{}
					g.Expect(cl.Get(ctx, client.ObjectKey{Name: n}, rep)).To(Succeed())
					e := reportEntry(rep, mns, "e2e-multi-spread")
					g.Expect(e).NotTo(BeNil(), "the entry of %s", n)
					g.Expect(e.PodsByNode).To(Equal([]numav1.NodeCount{{Node: 0, Pods: int32(want)}}), n)
					for _, p := range podsOf[n] {
						// The group a pod was placed in is its node's: "k of m" with m at most that
						// node's pods, never the cluster's 3. These hosts have one NUMA node each.
						out, err := kubectl(ctx, "get", "events", "-n", mns, "--field-selector", "involvedObject.name="+p+",reason=Applied")
						g.Expect(err).NotTo(HaveOccurred())
						g.Expect(out).To(MatchRegexp(fmt.Sprintf(`prefers NUMA node 0 \(NumaPreference e2e-multi-spread, Spread: [1-%[1]d] of [1-%[1]d] pods on node 0\)`, want)), p)
					}
				}
			}).WithContext(ctx).WithTimeout(60 * time.Second).Should(Succeed())
		}, SpecTimeout(4*time.Minute))
	})
}

// podReady tells whether the pod's Ready condition is true.
func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build integration

package agent

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
	"github.com/numapref/numapref/controllers/summarizer"
	"github.com/numapref/numapref/internal/nodeagent/desire"
	"github.com/numapref/numapref/internal/nodeagent/plan"
	"github.com/numapref/numapref/internal/testutil/builders"
	"github.com/numapref/numapref/internal/testutil/ctrltest"
)

var _ = Describe("NumaPreference validation by the apiserver", func() {
	ctx := context.Background()
	var ns string
	BeforeEach(func() { ns = env.NewNamespace(ctx) })

	DescribeTable("refuses an invalid object with a message a user understands",
		func(mutate func(*numav1.NumaPreference), message string) {
			p := builders.MakePreference(ns, "bad").Selector("app", "db").Node(0).Obj()
			mutate(p)
			err := env.Client.Create(ctx, p)
			Expect(err).To(HaveOccurred())
			Expect(err.Error()).To(ContainSubstring(message))
		},
		Entry("empty selector", func(p *numav1.NumaPreference) { p.Spec.Selector = numav1.LabelSelector{} },
			"selector must not be empty"),
		Entry("negative node", func(p *numav1.NumaPreference) { p.Spec.Node = ptr.To[int32](-1) },
			"spec.node: Invalid value: -1: spec.node in body should be greater than or equal to 0"),
		Entry("node beyond Linux's limit", func(p *numav1.NumaPreference) { p.Spec.Node = ptr.To[int32](1024) },
			"should be less than or equal to 1023"),
		Entry("no node", func(p *numav1.NumaPreference) { p.Spec.Node = nil }, "mode Static needs spec.node"),
		Entry("unknown page migration", func(p *numav1.NumaPreference) { p.Spec.PageMigration = "Always" },
			`spec.pageMigration: Unsupported value: "Always": supported values: "Never", "Once", "FollowHome"`),
		Entry("unknown mode", func(p *numav1.NumaPreference) { p.Spec.Mode = "Dynamic" },
			`spec.mode: Unsupported value: "Dynamic": supported values: "Static", "Spread", "FollowCPUs", "MostFreeMemory"`),
		Entry("node with an automatic mode", func(p *numav1.NumaPreference) { p.Spec.Mode = numav1.PlacementModeSpread },
			"spec.node is only for mode Static"),
		Entry("spec.nodes with Static", func(p *numav1.NumaPreference) { p.Spec.Nodes = []int32{0} },
			"spec.nodes restricts the automatic modes"),
		Entry("duplicate in spec.nodes", func(p *numav1.NumaPreference) {
			p.Spec.Mode, p.Spec.Node, p.Spec.Nodes = numav1.PlacementModeFollowCPUs, nil, []int32{1, 1}
		}, "spec.nodes[1]: Duplicate value: 1"),
		Entry("node id beyond Linux's limit in spec.nodes", func(p *numav1.NumaPreference) {
			p.Spec.Mode, p.Spec.Node, p.Spec.Nodes = numav1.PlacementModeMostFreeMemory, nil, []int32{0, 1024}
		}, "spec.nodes[1]: Invalid value: 1024: spec.nodes[1] in body should be less than or equal to 1023"),
		Entry("container name that is no DNS label", func(p *numav1.NumaPreference) { p.Spec.Containers = []string{"Bad_Name"} },
			"spec.containers[0]"),
		Entry("too many containers", func(p *numav1.NumaPreference) {
			for i := range 65 {
				p.Spec.Containers = append(p.Spec.Containers, "c"+strings.Repeat("x", i%10)+string(rune('a'+i%26))+string(rune('a'+i/26)))
			}
		}, "must have at most 64 items"),
		Entry("duplicate container", func(p *numav1.NumaPreference) { p.Spec.Containers = []string{"a", "a"} },
			"Duplicate value"),
		Entry("malformed selector operator", func(p *numav1.NumaPreference) {
			p.Spec.Selector = numav1.LabelSelector{MatchExpressions: []numav1.LabelSelectorRequirement{{Key: "app", Operator: "Near"}}}
		}, "selector operators must be In, NotIn, Exists or DoesNotExist"),
		Entry("In without values", func(p *numav1.NumaPreference) {
			p.Spec.Selector = numav1.LabelSelector{MatchExpressions: []numav1.LabelSelectorRequirement{{Key: "app", Operator: metav1.LabelSelectorOpIn}}}
		}, "selector values must be given for In and NotIn"),
	)

	It("accepts a valid object and defaults its mode to Static, its memory policy to Auto and its page migration to Never", func() {
		p := builders.MakePreference(ns, "good").Selector("app", "db").Node(1).Obj()
		Expect(env.Client.Create(ctx, p)).To(Succeed())
		Expect(p.Spec.Mode).To(Equal(numav1.PlacementModeStatic))
		Expect(p.Spec.MemoryPolicy).To(Equal(numav1.MemoryPolicyAuto))
		Expect(p.Spec.PageMigration).To(Equal(numav1.PageMigrationNever))
		for _, m := range []numav1.PageMigration{numav1.PageMigrationOnce, numav1.PageMigrationFollowHome} {
			q := builders.MakePreference(ns, "migrate-"+strings.ToLower(string(m))).Selector("app", "db").Node(1).PageMigration(m).Obj()
			Expect(env.Client.Create(ctx, q)).To(Succeed(), string(m))
		}
	})

	It("refuses an empty spec.nodes, as kubectl sends it", func() {
		// Go's omitempty would drop an empty list: send the object as a user's YAML does.
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": numav1.GroupVersion.String(), "kind": "NumaPreference",
			"metadata": map[string]any{"namespace": ns, "name": "empty-nodes"},
			"spec": map[string]any{"selector": map[string]any{"matchLabels": map[string]any{"app": "db"}},
				"mode": "Spread", "nodes": []any{}},
		}}
		err := env.Client.Create(ctx, u)
		Expect(err).To(HaveOccurred())
		Expect(err.Error()).To(ContainSubstring("spec.nodes must not be empty: leave it out to allow every NUMA node"))
	})

	It("accepts every sample of config/samples", func() {
		files, err := filepath.Glob(filepath.Join("..", "..", "config", "samples", "*.yaml"))
		Expect(err).NotTo(HaveOccurred())
		Expect(len(files)).To(BeNumerically(">=", 4), "a sample per mode")
		modes := map[string]bool{}
		for _, f := range files {
			data, err := os.ReadFile(f)
			Expect(err).NotTo(HaveOccurred())
			p := &numav1.NumaPreference{}
			Expect(yaml.UnmarshalStrict(data, p)).To(Succeed(), f)
			p.Namespace = ns
			Expect(env.Client.Create(ctx, p)).To(Succeed(), f)
			modes[string(p.Spec.Mode)] = true
		}
		Expect(modes).To(HaveLen(4), "Static, Spread, FollowCPUs, MostFreeMemory")
	})

	It("accepts every automatic mode, with and without spec.nodes", func() {
		for i, mode := range []numav1.PlacementMode{numav1.PlacementModeSpread, numav1.PlacementModeFollowCPUs, numav1.PlacementModeMostFreeMemory} {
			p := builders.MakePreference(ns, fmt.Sprintf("auto-%d", i)).Selector("app", "db").Mode(mode).Obj()
			Expect(env.Client.Create(ctx, p)).To(Succeed(), string(mode))
			p = builders.MakePreference(ns, fmt.Sprintf("auto-nodes-%d", i)).Selector("app", "db").Mode(mode).Nodes(0, 2).Obj()
			Expect(env.Client.Create(ctx, p)).To(Succeed(), string(mode)+" with spec.nodes")
		}
	})
})

var _ = Describe("Node agent controller", func() {
	ctx := context.Background()
	var ns string
	BeforeEach(func() { ns = env.NewNamespace(ctx) })

	It("gives a selected pod the oldest matching preference and marks the newer one as conflicting", func() {
		engine := newScriptedEngine(nil)
		startAgent("node-a", engine, withSummarizer())

		old := builders.MakePreference(ns, "old").Selector("app", "db").Node(0).Obj()
		Expect(env.Client.Create(ctx, old)).To(Succeed())
		newer := builders.MakePreference(ns, "newer").Selector("tier", "data").Node(1).Obj()
		// Same-second creation timestamps: the tie is broken by name, "newer" < "old" would
		// win; so make sure "old" is really older.
		Eventually(func() bool { return metav1.Now().Unix() > old.CreationTimestamp.Unix() }).Should(BeTrue())
		Expect(env.Client.Create(ctx, newer)).To(Succeed())
		pod := createRunning(ctx, builders.MakePod(ns, "db-0").Node("node-a").Label("app", "db").Label("tier", "data").Containers("app", "log").Obj())

		Eventually(func(g Gomega) {
			for _, c := range []string{"app", "log"} {
				d, ok := engine.Desired(pod, c)
				g.Expect(ok).To(BeTrue())
				g.Expect(d.Node).To(Equal(0))
				g.Expect(d.Preference).To(Equal("old"))
			}
		}).Should(Succeed())

		Eventually(func(g Gomega) {
			p := env.Preference(ctx, ns, "old")(g)
			g.Expect(nodeEntry(g, "node-a", ns, "old")).To(Equal(entry{Pods: 1, Containers: 2, Tasks: 6}))
			g.Expect(p.Status.Summary).To(Equal(numav1.Summary{Nodes: 1, Pods: 1, Containers: 2, Tasks: 6}))
			g.Expect(ctrltest.Condition(p, numav1.ConditionReady).Status).To(Equal(metav1.ConditionTrue))
			g.Expect(p.Status.ObservedGeneration).To(Equal(p.Generation))
		}).Should(Succeed())
		Eventually(func(g Gomega) {
			p := env.Preference(ctx, ns, "newer")(g)
			g.Expect(nodeEntry(g, "node-a", ns, "newer")).To(Equal(entry{
				Skipped: []numav1.ReasonCount{{Reason: numav1.ReasonOverriddenByPreference, Count: 2}}}))
			c := ctrltest.Condition(p, numav1.ConditionConflict)
			g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
			g.Expect(c.Reason).To(Equal(numav1.ReasonOverriddenByPreference))
			g.Expect(ctrltest.Condition(p, numav1.ConditionReady).Reason).To(Equal(numav1.ReasonNoMatchingPods))
		}).Should(Succeed())
		expectPodEvent(ctx, pod, "Conflict", "follows old, not NumaPreference newer")
		expectPodEvent(ctx, pod, numav1.ReasonApplied, "prefers NUMA node 0")
	})

	It("lets a pod annotation win over a NumaPreference, per container too", func() {
		engine := newScriptedEngine(nil)
		startAgent("node-a", engine, withSummarizer())
		Expect(env.Client.Create(ctx, builders.MakePreference(ns, "pref").Selector("app", "web").Node(0).Obj())).To(Succeed())
		pod := createRunning(ctx, builders.MakePod(ns, "web-0").Node("node-a").Label("app", "web").
			Annotation(numav1.AnnotationPreferredNode, "1").Annotation(numav1.AnnotationPreferredNodePrefix+"side", "2").
			Containers("main", "side").Obj())

		Eventually(func(g Gomega) {
			d, ok := engine.Desired(pod, "main")
			g.Expect(ok).To(BeTrue())
			g.Expect(d.Node).To(Equal(1))
			g.Expect(d.Preference).To(BeEmpty())
			d, ok = engine.Desired(pod, "side")
			g.Expect(ok).To(BeTrue())
			g.Expect(d.Node).To(Equal(2))
		}).Should(Succeed())
		Eventually(func(g Gomega) {
			p := env.Preference(ctx, ns, "pref")(g)
			g.Expect(nodeEntry(g, "node-a", ns, "pref")).To(Equal(entry{
				Skipped: []numav1.ReasonCount{{Reason: numav1.ReasonOverriddenByAnnotation, Count: 2}}}))
			g.Expect(ctrltest.Condition(p, numav1.ConditionConflict).Reason).To(Equal(numav1.ReasonOverriddenByAnnotation))
		}).Should(Succeed())
	})

	It("warns on an invalid annotation and acts on nothing for that container", func() {
		engine := newScriptedEngine(nil)
		startAgent("node-a", engine)
		pod := createRunning(ctx, builders.MakePod(ns, "bad-0").Node("node-a").Annotation(numav1.AnnotationPreferredNode, "one").Containers("main").Obj())
		Eventually(func(g Gomega) {
			d, ok := engine.Desired(pod, "main")
			g.Expect(ok).To(BeTrue())
			g.Expect(d.Refusal).To(Equal(numav1.ReasonInvalidAnnotation))
		}).Should(Succeed())
		expectPodEvent(ctx, pod, numav1.ReasonInvalidAnnotation, `"one" is not a NUMA node id`)
	})

	It("warns when a running container's cgroup is missing, but not while its pod terminates", func() {
		// gone-0's cgroup is missing while it runs: a Warning. gone-1 is applied until its
		// deletion starts; then the runtime removes its cgroups before kubelet reports the
		// container stopped, which is expected and gets no Warning.
		var terminating atomic.Bool
		engine := newScriptedEngine(func(d desire.Desire) plan.Result {
			if d.Pod.Name == "gone-0" || terminating.Load() {
				return plan.Result{Desire: d, Reason: numav1.ReasonContainerNotFound, Message: "container cgroup not found"}
			}
			return plan.Result{Desire: d, Reason: numav1.ReasonApplied, Tasks: 2}
		})
		mgr := startAgent("node-a", engine).mgr
		ann := map[string]string{numav1.AnnotationPreferredNode: "0"}
		running := createRunning(ctx, builders.MakePod(ns, "gone-0").Node("node-a").Annotations(ann).Containers("main").Obj())
		expectPodEvent(ctx, running, numav1.ReasonContainerNotFound, "container cgroup not found")

		pod := createRunning(ctx, builders.MakePod(ns, "gone-1").Node("node-a").Annotations(ann).Containers("main").Obj())
		expectPodEvent(ctx, pod, numav1.ReasonApplied, "prefers NUMA node 0 (pod annotation): container main")
		pod.Finalizers = []string{"numapref.io/test-hold"}
		Expect(env.Client.Update(ctx, pod)).To(Succeed())
		Expect(env.Client.Delete(ctx, pod)).To(Succeed())
		DeferCleanup(func() {
			Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(pod), pod)).To(Succeed())
			pod.Finalizers = nil
			Expect(env.Client.Update(ctx, pod)).To(Succeed())
		})
		// Synchronization, not an assertion: once the agent's own cache holds the deletion,
		// the cgroups go, as they would on a node.
		Eventually(func(g Gomega) {
			cached := &corev1.Pod{}
			g.Expect(mgr.GetCache().Get(ctx, client.ObjectKeyFromObject(pod), cached)).To(Succeed())
			g.Expect(cached.DeletionTimestamp).NotTo(BeNil())
		}).Should(Succeed())
		terminating.Store(true)
		calls := engine.calls.Load()
		engine.changes <- struct{}{}
		Eventually(engine.calls.Load).Should(BeNumerically(">", calls))
		d, ok := engine.Desired(pod, "main")
		Expect(ok).To(BeTrue(), "the agent still plans the terminating pod")
		Expect(d.Ref.ContainerID).NotTo(BeEmpty())
		Consistently(func(g Gomega) {
			var list eventsv1.EventList
			g.Expect(env.Client.List(ctx, &list, client.InNamespace(ns))).To(Succeed())
			for _, e := range list.Items {
				g.Expect(e.Regarding.UID == pod.UID && e.Reason == numav1.ReasonContainerNotFound).To(BeFalse(), e.Note)
			}
		}, "2s", "100ms").Should(Succeed())
	})

	It("reports a container pinned to another node as Degraded, with a pod Event", func() {
		engine := newScriptedEngine(func(d desire.Desire) plan.Result {
			return plan.Result{Desire: d, Reason: numav1.ReasonMemoryPinnedElsewhere,
				Message: "cpuset.mems of the container is 1; NUMA node 0 would fight it"}
		})
		startAgent("node-a", engine, withSummarizer())
		Expect(env.Client.Create(ctx, builders.MakePreference(ns, "pref").Selector("app", "pinned").Node(0).Obj())).To(Succeed())
		pod := createRunning(ctx, builders.MakePod(ns, "pinned-0").Node("node-a").Label("app", "pinned").Containers("main").Obj())

		Eventually(func(g Gomega) {
			p := env.Preference(ctx, ns, "pref")(g)
			c := ctrltest.Condition(p, numav1.ConditionDegraded)
			g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
			g.Expect(c.Reason).To(Equal(numav1.ReasonMemoryPinnedElsewhere))
			g.Expect(ctrltest.Condition(p, numav1.ConditionReady).Reason).To(Equal(numav1.ReasonPartiallyApplied))
		}).Should(Succeed())
		expectPodEvent(ctx, pod, numav1.ReasonMemoryPinnedElsewhere, "cpuset.mems of the container is 1")
	})

	It("withdraws the desire when the pod stops matching and when the preference is deleted", func() {
		engine := newScriptedEngine(nil)
		startAgent("node-a", engine, withSummarizer())
		pref := builders.MakePreference(ns, "pref").Selector("app", "x").Node(0).Obj()
		Expect(env.Client.Create(ctx, pref)).To(Succeed())
		a := createRunning(ctx, builders.MakePod(ns, "a").Node("node-a").Label("app", "x").Containers("main").Obj())
		b := createRunning(ctx, builders.MakePod(ns, "b").Node("node-a").Label("app", "x").Containers("main").Obj())
		Eventually(func() bool { _, ok := engine.Desired(a, "main"); return ok }).Should(BeTrue())
		Eventually(func() bool { _, ok := engine.Desired(b, "main"); return ok }).Should(BeTrue())

		a.Labels = map[string]string{"app": "y"}
		Expect(env.Client.Update(ctx, a)).To(Succeed())
		Eventually(func() bool { _, ok := engine.Desired(a, "main"); return ok }).Should(BeFalse())
		Eventually(func(g Gomega) {
			g.Expect(env.Preference(ctx, ns, "pref")(g).Status.Summary.Pods).To(Equal(int32(1)))
		}).Should(Succeed())

		Expect(env.Client.Delete(ctx, pref)).To(Succeed())
		Eventually(func() bool { _, ok := engine.Desired(b, "main"); return ok }).Should(BeFalse())
	})

	It("keeps each node's counts in its own report, adds them up, and drops an entry with nothing left", func() {
		ea, eb := newScriptedEngine(appliedWithTasks(2)), newScriptedEngine(appliedWithTasks(5))
		startAgent("node-a", ea, withSummarizer())
		startAgent("node-b", eb)
		Expect(env.Client.Create(ctx, builders.MakePreference(ns, "pref").Selector("app", "spread").Node(0).Obj())).To(Succeed())
		createRunning(ctx, builders.MakePod(ns, "s-a").Node("node-a").Label("app", "spread").Containers("main").Obj())
		pb := createRunning(ctx, builders.MakePod(ns, "s-b").Node("node-b").Label("app", "spread").Containers("main", "side").Obj())

		Eventually(func(g Gomega) {
			p := env.Preference(ctx, ns, "pref")(g)
			g.Expect(nodeEntry(g, "node-a", ns, "pref")).To(Equal(entry{Pods: 1, Containers: 1, Tasks: 2}))
			g.Expect(nodeEntry(g, "node-b", ns, "pref")).To(Equal(entry{Pods: 1, Containers: 2, Tasks: 10}))
			g.Expect(p.Status.Summary).To(Equal(numav1.Summary{Nodes: 2, Pods: 2, Containers: 3, Tasks: 12}))
			// One writer per object: each agent its own report, the summarizer the status.
			g.Expect(managersOf(p.ManagedFields)).To(And(HaveKey(summarizer.SummaryFieldManager),
				Not(HaveKey(AgentFieldManager("node-a"))), Not(HaveKey(AgentFieldManager("node-b")))))
			for _, node := range []string{"node-a", "node-b"} {
				rep := &numav1.NumaNodeReport{}
				g.Expect(env.Client.Get(ctx, client.ObjectKey{Name: node}, rep)).To(Succeed())
				g.Expect(managersOf(rep.ManagedFields)).To(Equal(map[string]bool{AgentFieldManager(node): true}))
				g.Expect(rep.OwnerReferences).To(ConsistOf(HaveField("Name", node)))
			}
		}).Should(Succeed())

		// No kubelet confirms the deletion here: remove the pod at once.
		Expect(env.Client.Delete(ctx, pb, client.GracePeriodSeconds(0))).To(Succeed())
		Eventually(func(g Gomega) {
			p := env.Preference(ctx, ns, "pref")(g)
			g.Expect(nodeEntry(g, "node-b", ns, "pref")).To(Equal(entry{}), "node-b has no entry left")
			g.Expect(p.Status.Summary).To(Equal(numav1.Summary{Nodes: 1, Pods: 1, Containers: 1, Tasks: 2}))
		}).Should(Succeed())
	})

	It("writes no status when nothing changed", func() {
		engine := newScriptedEngine(nil)
		startAgent("node-a", engine, withSummarizer())
		Expect(env.Client.Create(ctx, builders.MakePreference(ns, "pref").Selector("app", "quiet").Node(0).Obj())).To(Succeed())
		pod := createRunning(ctx, builders.MakePod(ns, "q").Node("node-a").Label("app", "quiet").Containers("main").Obj())
		var settled, reported string
		Eventually(func(g Gomega) {
			p := env.Preference(ctx, ns, "pref")(g)
			g.Expect(ctrltest.Condition(p, numav1.ConditionReady).Status).To(Equal(metav1.ConditionTrue))
			settled = p.ResourceVersion
			rep := &numav1.NumaNodeReport{}
			g.Expect(env.Client.Get(ctx, client.ObjectKey{Name: "node-a"}, rep)).To(Succeed())
			reported = rep.ResourceVersion
		}).Should(Succeed())

		// Make the agent reconcile many times with nothing that changes the outcome.
		before := engine.calls.Load()
		for i := range 5 {
			Expect(env.Client.Get(ctx, keyOf(ns, pod.Name), pod)).To(Succeed())
			pod.Annotations = map[string]string{"unrelated": strings.Repeat("x", i+1)}
			Expect(env.Client.Update(ctx, pod)).To(Succeed())
		}
		Eventually(func() int32 { return engine.calls.Load() - before }).Should(BeNumerically(">=", 5))
		Consistently(func(g Gomega) {
			g.Expect(env.Preference(ctx, ns, "pref")(g).ResourceVersion).To(Equal(settled))
			rep := &numav1.NumaNodeReport{}
			g.Expect(env.Client.Get(ctx, client.ObjectKey{Name: "node-a"}, rep)).To(Succeed())
			g.Expect(rep.ResourceVersion).To(Equal(reported))
		}, "2s").Should(Succeed())
	})
})

// entry is what a spec asserts of a node's report entry.
type entry struct {
	Pods, Containers, Tasks int32
	Skipped, Failed         []numav1.ReasonCount
}

// nodeEntry reads node's report entry for the preference ns/name (zero when none).
func nodeEntry(g Gomega, node, ns, name string) entry {
	rep := &numav1.NumaNodeReport{}
	g.Expect(env.Client.Get(context.Background(), client.ObjectKey{Name: node}, rep)).To(Succeed())
	for _, e := range rep.Status.Preferences {
		if e.Namespace == ns && e.Name == name {
			return entry{Pods: e.Pods, Containers: e.Containers, Tasks: e.Tasks, Skipped: e.Skipped, Failed: e.Failed}
		}
	}
	return entry{}
}

func managersOf(fields []metav1.ManagedFieldsEntry) map[string]bool {
	m := map[string]bool{}
	for _, f := range fields {
		m[f.Manager] = true
	}
	return m
}

// expectPodEvent waits for an events.k8s.io Event about pod with reason and a note
// containing text.
func expectPodEvent(ctx context.Context, pod *corev1.Pod, reason, text string) {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		var list eventsv1.EventList
		g.Expect(env.Client.List(ctx, &list, client.InNamespace(pod.Namespace))).To(Succeed())
		var notes []string
		for _, e := range list.Items {
			if e.Regarding.UID == pod.UID && e.Reason == reason {
				notes = append(notes, e.Note)
			}
		}
		g.Expect(notes).To(ContainElement(ContainSubstring(text)))
	}).Should(Succeed())
}

var _ = Describe("Node facts", func() {
	ctx := context.Background()
	It("labels the node, reports its facts, and tells when the kernel ignores the preference", func() {
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "facts-node", Labels: map[string]string{"keep": "me"}}}
		Expect(env.Client.Create(ctx, node)).To(Succeed())
		var balancing atomic.Value
		balancing.Store("disabled")
		opts := testAgentOptions
		opts.Facts = func() NodeFacts {
			return NodeFacts{KernelSupport: "emulator", NUMABalancing: balancing.Load().(string), NUMANodes: 2}
		}
		engine := newScriptedEngine(nil)
		startAgent("facts-node", engine, withSummarizer(), withOptions(opts))
		Eventually(func(g Gomega) {
			g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(node), node)).To(Succeed())
			g.Expect(node.Labels).To(Equal(map[string]string{"keep": "me",
				LabelKernelSupport: "emulator", LabelNUMABalancing: "disabled", LabelNUMANodes: "2", LabelMemoryPolicy: "unavailable",
				LabelPageMigration: "unavailable"}))
			rep := &numav1.NumaNodeReport{}
			g.Expect(env.Client.Get(ctx, client.ObjectKey{Name: "facts-node"}, rep)).To(Succeed())
			g.Expect(rep.Status.KernelSupport).To(Equal("emulator"))
			g.Expect(rep.Status.NumaBalancing).To(Equal("disabled"))
			g.Expect(rep.Status.NumaNodes).To(Equal(int32(2)))
		}).Should(Succeed())

		// A pod placed while kernel.numa_balancing is off: Ready, but not Effective.
		ns := env.NewNamespace(ctx)
		Expect(env.Client.Create(ctx, builders.MakePreference(ns, "pref").Selector("app", "db").Node(0).Obj())).To(Succeed())
		pod := createRunning(ctx, builders.MakePod(ns, "db-0").Node("facts-node").Label("app", "db").Containers("main").Obj())
		Eventually(func(g Gomega) {
			p := env.Preference(ctx, ns, "pref")(g)
			g.Expect(ctrltest.Condition(p, numav1.ConditionReady).Status).To(Equal(metav1.ConditionTrue))
			c := ctrltest.Condition(p, numav1.ConditionEffective)
			g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(c.Reason).To(Equal(numav1.ReasonNumaBalancingDisabled))
			g.Expect(c.Message).To(ContainSubstring("facts-node"))
			g.Expect(p.Status.ProblemNodes).To(Equal([]numav1.NodeProblem{{NodeName: "facts-node", Reason: numav1.ReasonNumaBalancingDisabled, Count: 1}}))
		}).Should(Succeed())
		expectPodEvent(ctx, pod, numav1.ReasonNumaBalancingDisabled, "kernel.numa_balancing is disabled on node facts-node")

		// Balancing switched on: the labels, the report and the condition follow.
		balancing.Store("normal")
		engine.changes <- struct{}{}
		Eventually(func(g Gomega) {
			g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(node), node)).To(Succeed())
			g.Expect(node.Labels).To(HaveKeyWithValue(LabelNUMABalancing, "normal"))
			p := env.Preference(ctx, ns, "pref")(g)
			g.Expect(ctrltest.Condition(p, numav1.ConditionEffective).Status).To(Equal(metav1.ConditionTrue))
			g.Expect(p.Status.ProblemNodes).To(BeEmpty())
		}).Should(Succeed())
	})
})

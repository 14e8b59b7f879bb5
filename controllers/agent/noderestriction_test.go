// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build integration

package agent

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus/testutil"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
	numaac "github.com/numapref/numapref/api/v1alpha1/applyconfiguration/api/v1alpha1"
	"github.com/numapref/numapref/internal/metrics"
	"github.com/numapref/numapref/internal/testutil/builders"
	"github.com/numapref/numapref/internal/testutil/ctrltest"
	"github.com/numapref/numapref/internal/testutil/testenv"
)

// The node restriction policy (config/rbac/node_restriction_policy.yaml), with the agent's
// real ClusterRole, against the real apiserver: a token bound to a pod on node A may write
// node A's report and the numapref.io/ labels the agent publishes, and nothing of node B.
var _ = Describe("Node restriction", Ordered, func() {
	ctx := context.Background()
	const agentNS, agentSA, summarizerSA = "numapref-system", "numapref-agent", "numapref-summarizer"
	var agent client.Client
	var agentCfg *rest.Config

	BeforeAll(func() {
		// The namespace first: role.yaml holds the agent's Role in it (its own DaemonSet).
		Expect(env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: agentNS}})).To(Succeed())
		for _, f := range []string{"node_restriction_policy.yaml", "role.yaml"} {
			createManifests(ctx, filepath.Join("..", "..", "config", "rbac", f))
		}
		Expect(env.Client.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: agentNS, Name: agentSA}})).To(Succeed())
		Expect(env.Client.Create(ctx, &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "numapref-agent-restriction-test"},
			RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "numapref-agent"},
			Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: agentNS, Name: agentSA}},
		})).To(Succeed())
		// The summarizer's own rights (config/rbac/summarizer), for its ServiceAccount: it
		// writes the preferences' status, which the agents may not.
		createManifests(ctx, filepath.Join("..", "..", "config", "rbac", "summarizer", "role.yaml"))
		Expect(env.Client.Create(ctx, &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "numapref-summarizer-restriction-test"},
			RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "numapref-summarizer"},
			Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: agentNS, Name: summarizerSA}},
		})).To(Succeed())
		createNodes(ctx, "restrict-a", "restrict-b")
		agentCfg = agentConfig(ctx, agentNS, agentSA, "restrict-a")
		agent = clientOf(agentCfg)
	})

	It("refuses another node's report, and allows the agent's own", func() {
		expectOwnReportOnly(ctx, agent, "restrict-a", "restrict-b")
	})

	It("refuses another node's labels and any label outside numapref.io/", func() {
		labels := func(node string, l map[string]string) error {
			return agent.Apply(ctx, corev1ac.Node(node).WithLabels(l), client.FieldOwner("numapref-agent/"+node), client.ForceOwnership)
		}
		Eventually(func(g Gomega) {
			err := labels("restrict-b", map[string]string{LabelNUMANodes: "2"})
			g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "want Forbidden, got %v", err)
			g.Expect(err.Error()).To(ContainSubstring("may not write Node restrict-b"))
		}).Should(Succeed())
		Expect(labels("restrict-a", map[string]string{LabelNUMANodes: "2", LabelKernelSupport: "emulator"})).To(Succeed())
		for _, foreign := range []string{"team", "numapref.io/other"} {
			err := labels("restrict-a", map[string]string{foreign: "y"})
			Expect(apierrors.IsForbidden(err)).To(BeTrue(), "label %s: %v", foreign, err)
			Expect(err.Error()).To(ContainSubstring("may change only the numapref.io/ labels it publishes on its node, not " + foreign))
		}

		node := &corev1.Node{}
		Expect(env.Client.Get(ctx, client.ObjectKey{Name: "restrict-a"}, node)).To(Succeed())
		Expect(node.Labels).To(Equal(map[string]string{"team": "x", LabelNUMANodes: "2", LabelKernelSupport: "emulator"}))
	})

	It("refuses values of its own labels that the agent never publishes", func() {
		for label, value := range map[string]string{LabelNUMANodes: "many", LabelKernelSupport: "prctl-v9", LabelNUMABalancing: "on", LabelNRI: "Connected"} {
			err := agent.Apply(ctx, corev1ac.Node("restrict-a").WithLabels(map[string]string{label: value}),
				client.FieldOwner("numapref-agent/restrict-a"), client.ForceOwnership)
			Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%s=%s: %v", label, value, err)
			Expect(err.Error()).To(ContainSubstring("only to values it publishes"))
		}
		for label, value := range map[string]string{LabelNUMANodes: "4", LabelKernelSupport: "prctl", LabelNUMABalancing: "normal-memory-tiering", LabelNRI: "disconnected"} {
			Expect(agent.Apply(ctx, corev1ac.Node("restrict-a").WithLabels(map[string]string{label: value}),
				client.FieldOwner("numapref-agent/restrict-a"), client.ForceOwnership)).To(Succeed(), "%s=%s", label, value)
		}
	})

	It("refuses a change of its own Node's finalizers or owners", func() {
		owner := metav1ac.OwnerReference().WithAPIVersion("v1").WithKind("Namespace").WithName(agentNS).WithUID("0d1e6b4e-1b1a-4c1e-9a57-3f1f3c1b2a10")
		for what, ac := range map[string]*corev1ac.NodeApplyConfiguration{
			"finalizer": corev1ac.Node("restrict-a").WithFinalizers("example.com/hold"),
			"owner":     corev1ac.Node("restrict-a").WithOwnerReferences(owner),
		} {
			err := agent.Apply(ctx, ac, client.FieldOwner("numapref-agent/restrict-a"))
			Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%s: %v", what, err)
			Expect(err.Error()).To(ContainSubstring("not its finalizers or ownerReferences"))
		}
		node := &corev1.Node{}
		Expect(env.Client.Get(ctx, client.ObjectKey{Name: "restrict-a"}, node)).To(Succeed())
		Expect(node.Finalizers).To(BeEmpty())
		Expect(node.OwnerReferences).To(BeEmpty())
	})

	It("admits the agent's Events only as numapref-agent, with its reasons, about a Pod or its own Node", func() {
		event := func(name string, mod func(*eventsv1.Event)) *eventsv1.Event {
			e := &eventsv1.Event{
				ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}, EventTime: metav1.NowMicro(),
				ReportingController: "numapref-agent", ReportingInstance: "numapref-agent-restrict-a",
				Action: "SetPreferredNode", Reason: numav1.ReasonApplied, Type: corev1.EventTypeNormal, Note: "placed",
				Regarding: corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: "db-0", APIVersion: "v1"},
			}
			if mod != nil {
				mod(e)
			}
			return e
		}
		Eventually(func() error { return agent.Create(ctx, event("own-pod", nil)) }).Should(Succeed())
		Expect(agent.Create(ctx, event("own-node", func(e *eventsv1.Event) {
			e.Namespace, e.Reason, e.Type = "default", numav1.ReasonLedgerDamaged, corev1.EventTypeWarning
			e.Regarding = corev1.ObjectReference{Kind: "Node", Name: "restrict-a", APIVersion: "v1"}
		}))).To(Succeed())
		for name, c := range map[string]struct {
			mod  func(*eventsv1.Event)
			want string
		}{
			"as-kubelet":     {func(e *eventsv1.Event) { e.ReportingController, e.Reason = "kubelet", numav1.ReasonApplied }, "only as numapref-agent"},
			"foreign-reason": {func(e *eventsv1.Event) { e.Reason = "Killing" }, "only with a reason of its own"},
			"other-node": {func(e *eventsv1.Event) {
				e.Regarding = corev1.ObjectReference{Kind: "Node", Name: "restrict-b", APIVersion: "v1"}
			}, "about its own Node only"},
			"about-a-secret": {func(e *eventsv1.Event) { e.Regarding.Kind = "Secret" }, "only about a Pod or its own Node"},
		} {
			err := agent.Create(ctx, event(name, c.mod))
			Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%s: %v", name, err)
			Expect(err.Error()).To(ContainSubstring(c.want), name)
		}
	})

	// Last: it deletes the policy's binding.
	It("lets the agent prove the restriction, and report NodeRestrictionMissing once the binding is gone", func() {
		opts := testAgentOptions
		opts.NodeRestrictionCheck = 200 * time.Millisecond
		startAgent("restrict-a", newScriptedEngine(appliedWithTasks(3)), withConfig(agentCfg), withOptions(opts))
		// The summarizer as its own Deployment runs it: under its ServiceAccount, apart.
		summarizerCfg := rest.CopyConfig(env.Config)
		summarizerCfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + agentNS + ":" + summarizerSA}
		startSummarizerAs(summarizerCfg)
		ns := env.NewNamespace(ctx)
		createRunning(ctx, builders.MakePod(ns, "db-0").Node("restrict-a").Labels(map[string]string{"app": "db"}).Containers("db").Obj())
		Expect(env.Client.Create(ctx, builders.MakePreference(ns, "db").Selector("app", "db").Node(0).Obj())).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(restrictedCondition(g, ctx, "restrict-a")).To(And(
				HaveField("Status", metav1.ConditionTrue), HaveField("Reason", numav1.ReasonNodeRestrictionEnforced)))
			g.Expect(ctrltest.Condition(env.Preference(ctx, ns, "db")(g), numav1.ConditionReady).Status).To(Equal(metav1.ConditionTrue))
		}).Should(Succeed())
		Expect(testutil.ToFloat64(metrics.NodeRestrictionMissing)).To(BeZero())
		Expect(nodeEvents(ctx, "restrict-a", numav1.ReasonNodeRestrictionMissing)).To(BeEmpty())
		Expect(ctrltest.Condition(env.Preference(ctx, ns, "db")(Default), numav1.ConditionNodeRestricted).Type).To(BeEmpty())

		Expect(env.Client.Delete(ctx, &admissionv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: "numapref-agent-node-restriction"}})).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(testutil.ToFloat64(metrics.NodeRestrictionMissing)).To(Equal(1.0))
			g.Expect(restrictedCondition(g, ctx, "restrict-a")).To(And(
				HaveField("Status", metav1.ConditionFalse), HaveField("Reason", numav1.ReasonNodeRestrictionMissing),
				HaveField("Message", ContainSubstring("NumaNodeReport numapref-restriction-check of another node and label "+restrictionProbeLabel))))
			g.Expect(nodeEvents(ctx, "restrict-a", numav1.ReasonNodeRestrictionMissing)).To(ConsistOf(
				HaveField("Type", corev1.EventTypeWarning)))
			// The summarizer carries it into the status of the preference the node reports.
			g.Expect(ctrltest.Condition(env.Preference(ctx, ns, "db")(g), numav1.ConditionNodeRestricted)).To(And(
				HaveField("Status", metav1.ConditionFalse), HaveField("Reason", numav1.ReasonNodeRestrictionMissing),
				HaveField("Message", ContainSubstring("nodes restrict-a:"))))
		}).Should(Succeed())

		// The check's writes were dry runs: nothing of them is stored.
		err := env.Client.Get(ctx, client.ObjectKey{Name: probeReportName("restrict-a")}, &numav1.NumaNodeReport{})
		Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the check's report: %v", err)
		node := &corev1.Node{}
		Expect(env.Client.Get(ctx, client.ObjectKey{Name: "restrict-a"}, node)).To(Succeed())
		Expect(node.Labels).NotTo(HaveKey(restrictionProbeLabel))
	})
})

// restrictedCondition is the NodeRestricted condition of node's report.
func restrictedCondition(g Gomega, ctx context.Context, node string) metav1.Condition {
	rep := &numav1.NumaNodeReport{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Name: node}, rep)).To(Succeed())
	c := meta.FindStatusCondition(rep.Status.Conditions, numav1.ConditionNodeRestricted)
	g.Expect(c).NotTo(BeNil(), "report %s has no %s condition", node, numav1.ConditionNodeRestricted)
	return *c
}

// nodeEvents lists the Events of reason about node.
func nodeEvents(ctx context.Context, node, reason string) []eventsv1.Event {
	GinkgoHelper()
	var list eventsv1.EventList
	Expect(env.Client.List(ctx, &list)).To(Succeed())
	var out []eventsv1.Event
	for _, e := range list.Items {
		if e.Regarding.Kind == "Node" && e.Regarding.Name == node && e.Reason == reason {
			out = append(out, e)
		}
	}
	return out
}

// config/default under an overlay that renames its namespace and prefixes every name, as
// `kubectl kustomize` renders it: the renamed agent is held by the renamed policy.
var _ = Describe("Node restriction under a renaming kustomize overlay", Ordered, func() {
	ctx := context.Background()
	const agentNS, agentSA = "team-numa", "acme-numapref-agent"
	var agent client.Client

	BeforeAll(func() {
		rendered := kustomize(filepath.Join("testdata", "renamed-overlay"))
		Expect(string(rendered)).NotTo(ContainSubstring("numapref-system"), "the overlay's output still names the original namespace")
		Expect(env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: agentNS}})).To(Succeed())
		for _, u := range manifests(rendered) {
			switch u.GetKind() {
			case "Namespace", "CustomResourceDefinition", "DaemonSet": // made above, by the suite; no pod runs here
				continue
			}
			Expect(env.Client.Create(ctx, u)).To(Succeed(), "creating %s %s", u.GetKind(), u.GetName())
		}
		createNodes(ctx, "renamed-a", "renamed-b")
		agent = clientOf(agentConfig(ctx, agentNS, agentSA, "renamed-a"))
	})

	It("refuses the renamed agent another node's report, and allows its own", func() {
		expectOwnReportOnly(ctx, agent, "renamed-a", "renamed-b")
	})
})

// expectOwnReportOnly checks that agent, whose token is bound to a pod on own, may write
// (apply, delete) own's report and neither write nor delete other's, and that the policy,
// not RBAC, refuses it.
func expectOwnReportOnly(ctx context.Context, agent client.Client, own, other string) {
	GinkgoHelper()
	report := func(node string) *numaac.NumaNodeReportApplyConfiguration {
		return numaac.NumaNodeReport(node).WithStatus(numaac.NumaNodeReportStatus().WithKernelSupport("emulator"))
	}
	Eventually(func(g Gomega) {
		err := agent.Apply(ctx, report(other), client.FieldOwner(AgentFieldManager(own)))
		g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "want Forbidden, got %v", err)
		g.Expect(err.Error()).To(ContainSubstring("the numapref agent of node " + own + " may not write NumaNodeReport " + other))
	}).Should(Succeed())
	Expect(agent.Apply(ctx, report(own), client.FieldOwner(AgentFieldManager(own)))).To(Succeed())

	// A report of the other node that exists (written by someone else) may not be deleted either.
	Expect(env.Client.Apply(ctx, report(other), client.FieldOwner("admin"))).To(Succeed())
	err := agent.Delete(ctx, &numav1.NumaNodeReport{ObjectMeta: metav1.ObjectMeta{Name: other}})
	Expect(apierrors.IsForbidden(err)).To(BeTrue(), "delete of node %s's report: %v", other, err)
	Expect(agent.Delete(ctx, &numav1.NumaNodeReport{ObjectMeta: metav1.ObjectMeta{Name: own}})).To(Succeed())
}

// agentConfig makes the agent's pod on node (ServiceAccount sa in ns) and returns a config
// with a token bound to it, as kubelet would project it: it authenticates with the node's name.
func agentConfig(ctx context.Context, ns, sa, node string) *rest.Config {
	GinkgoHelper()
	pod := builders.MakePod(ns, "agent-"+node).Node(node).ServiceAccount(sa).
		Containers("agent").Image("example.invalid/numapref").Obj()
	Expect(env.Client.Create(ctx, pod)).To(Succeed())
	cs, err := kubernetes.NewForConfig(env.Config)
	Expect(err).NotTo(HaveOccurred())
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, &authv1.TokenRequest{Spec: authv1.TokenRequestSpec{
		BoundObjectRef: &authv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID},
	}}, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())

	// The token authenticates with the node's name, or the specs prove nothing.
	review, err := cs.AuthenticationV1().TokenReviews().Create(ctx, &authv1.TokenReview{Spec: authv1.TokenReviewSpec{Token: tr.Status.Token}}, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())
	Expect(review.Status.User.Extra).To(HaveKeyWithValue("authentication.kubernetes.io/node-name", authv1.ExtraValue{node}))

	agentCfg := rest.AnonymousClientConfig(env.Config)
	agentCfg.BearerToken = tr.Status.Token
	return agentCfg
}

func clientOf(c *rest.Config) client.Client {
	GinkgoHelper()
	cl, err := client.New(c, client.Options{Scheme: env.Scheme})
	Expect(err).NotTo(HaveOccurred())
	return cl
}

// createNodes creates Nodes with a label of someone else's.
func createNodes(ctx context.Context, names ...string) {
	GinkgoHelper()
	for _, n := range names {
		Expect(env.Client.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n, Labels: map[string]string{"team": "x"}}})).To(Succeed())
	}
}

// kustomize renders dir with the kubectl beside the envtest binaries (hack/k8s-binaries.sh
// builds it), whose kustomize is the one `kubectl apply -k` runs.
func kustomize(dir string) []byte {
	GinkgoHelper()
	kubectl := filepath.Join(os.Getenv("KUBEBUILDER_ASSETS"), "kubectl")
	if _, err := os.Stat(kubectl); err != nil {
		if testenv.InCI() {
			Fail("precondition missing under CI=true: kubectl in KUBEBUILDER_ASSETS: " + err.Error())
		}
		Skip("precondition missing: kubectl in KUBEBUILDER_ASSETS (" + err.Error() + "); to run this test: make integration (hack/k8s-binaries.sh builds it)")
	}
	var stderr bytes.Buffer
	cmd := exec.Command(kubectl, "kustomize", dir)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	Expect(err).NotTo(HaveOccurred(), "kubectl kustomize %s: %s", dir, stderr.String())
	return out
}

// createManifests creates every object of a multi-document YAML file.
func createManifests(ctx context.Context, path string) {
	GinkgoHelper()
	data, err := os.ReadFile(path)
	Expect(err).NotTo(HaveOccurred())
	for _, u := range manifests(data) {
		Expect(env.Client.Create(ctx, u)).To(Succeed(), "creating %s from %s", u.GetName(), path)
	}
}

// manifests decodes every object of a multi-document YAML stream.
func manifests(data []byte) []*unstructured.Unstructured {
	GinkgoHelper()
	var out []*unstructured.Unstructured
	for _, doc := range bytes.Split(data, []byte("\n---")) {
		u := &unstructured.Unstructured{}
		Expect(yaml.Unmarshal(doc, &u.Object)).To(Succeed())
		if len(u.Object) > 0 {
			out = append(out, u)
		}
	}
	return out
}

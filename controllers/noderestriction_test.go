//go:build integration

package controllers

import (
	"bytes"
	"context"
	"os"
	"path/filepath"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
	numaac "github.com/numapref/numapref/api/v1alpha1/applyconfiguration/api/v1alpha1"
	"github.com/numapref/numapref/internal/testutil/builders"
)

// The node restriction policy (config/rbac/node_restriction_policy.yaml), with the agent's
// real ClusterRole, against the real apiserver: a token bound to a pod on node A may write
// node A's report and numapref.io/ labels, and nothing of node B.
var _ = Describe("Node restriction", Ordered, func() {
	ctx := context.Background()
	const agentNS, agentSA = "numapref-system", "numapref-agent"
	var agent client.Client

	BeforeAll(func() {
		// The namespace first: role.yaml holds the agent's Role in it (its own DaemonSet).
		Expect(k8sClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: agentNS}})).To(Succeed())
		for _, f := range []string{"node_restriction_policy.yaml", "role.yaml"} {
			createManifests(ctx, filepath.Join("..", "config", "rbac", f))
		}
		Expect(k8sClient.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: agentNS, Name: agentSA}})).To(Succeed())
		Expect(k8sClient.Create(ctx, &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "numapref-agent-restriction-test"},
			RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "numapref-agent"},
			Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: agentNS, Name: agentSA}},
		})).To(Succeed())
		for _, n := range []string{"restrict-a", "restrict-b"} {
			Expect(k8sClient.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n, Labels: map[string]string{"team": "x"}}})).To(Succeed())
		}
		// The agent's pod on node A, and a token bound to it, as kubelet would project it.
		pod := builders.MakePod(agentNS, "agent-a").Node("restrict-a").ServiceAccount(agentSA).
			Containers("agent").Image("example.invalid/numapref").Obj()
		Expect(k8sClient.Create(ctx, pod)).To(Succeed())
		cs, err := kubernetes.NewForConfig(cfg)
		Expect(err).NotTo(HaveOccurred())
		tr, err := cs.CoreV1().ServiceAccounts(agentNS).CreateToken(ctx, agentSA, &authv1.TokenRequest{Spec: authv1.TokenRequestSpec{
			BoundObjectRef: &authv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID},
		}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		agentCfg := rest.AnonymousClientConfig(cfg)
		agentCfg.BearerToken = tr.Status.Token
		agent, err = client.New(agentCfg, client.Options{Scheme: scheme})
		Expect(err).NotTo(HaveOccurred())

		// The token authenticates with node A's name, or the spec below proves nothing.
		review, err := cs.AuthenticationV1().TokenReviews().Create(ctx, &authv1.TokenReview{Spec: authv1.TokenReviewSpec{Token: tr.Status.Token}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(review.Status.User.Extra).To(HaveKeyWithValue("authentication.kubernetes.io/node-name", authv1.ExtraValue{"restrict-a"}))
	})

	report := func(node string) *numaac.NumaNodeReportApplyConfiguration {
		return numaac.NumaNodeReport(node).WithStatus(numaac.NumaNodeReportStatus().WithKernelSupport("emulator"))
	}

	It("refuses another node's report, and allows the agent's own", func() {
		Eventually(func(g Gomega) {
			err := agent.Apply(ctx, report("restrict-b"), client.FieldOwner("numapref-agent/restrict-a"))
			g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "want Forbidden, got %v", err)
			g.Expect(err.Error()).To(ContainSubstring("the numapref agent of node restrict-a may not write NumaNodeReport restrict-b"))
		}).Should(Succeed())
		Expect(agent.Apply(ctx, report("restrict-a"), client.FieldOwner("numapref-agent/restrict-a"))).To(Succeed())

		// A report of node B that exists (written by someone else) may not be deleted either.
		Expect(k8sClient.Apply(ctx, report("restrict-b"), client.FieldOwner("admin"))).To(Succeed())
		err := agent.Delete(ctx, &numav1.NumaNodeReport{ObjectMeta: metav1.ObjectMeta{Name: "restrict-b"}})
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "delete of node B's report: %v", err)
		Expect(agent.Delete(ctx, &numav1.NumaNodeReport{ObjectMeta: metav1.ObjectMeta{Name: "restrict-a"}})).To(Succeed())
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
		err := labels("restrict-a", map[string]string{"team": "y"})
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "a foreign label: %v", err)
		Expect(err.Error()).To(ContainSubstring("may change only numapref.io/ labels"))

		node := &corev1.Node{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Name: "restrict-a"}, node)).To(Succeed())
		Expect(node.Labels).To(Equal(map[string]string{"team": "x", LabelNUMANodes: "2", LabelKernelSupport: "emulator"}))
	})
})

// createManifests creates every object of a multi-document YAML file.
func createManifests(ctx context.Context, path string) {
	GinkgoHelper()
	data, err := os.ReadFile(path)
	Expect(err).NotTo(HaveOccurred())
	for _, doc := range bytes.Split(data, []byte("\n---")) {
		var u unstructured.Unstructured
		Expect(yaml.Unmarshal(doc, &u.Object)).To(Succeed())
		if len(u.Object) == 0 {
			continue
		}
		Expect(k8sClient.Create(ctx, &u)).To(Succeed(), "creating %s from %s", u.GetName(), path)
	}
}

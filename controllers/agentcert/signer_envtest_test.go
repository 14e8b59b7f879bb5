// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build integration

package agentcert

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"net"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// testSignerUser is the signer's ServiceAccount, as the signer spec runs it.
const testSignerUser = "system:serviceaccount:numapref-system:numapref-signer"

// signerRules are the rights of the signer's markers (signer.go): the signer runs with these
// only, so that the spec fails if they do not suffice.
var signerRules = []rbacv1.PolicyRule{
	{APIGroups: []string{"certificates.k8s.io"}, Resources: []string{"certificatesigningrequests"}, Verbs: []string{"get", "list", "watch"}},
	{APIGroups: []string{"certificates.k8s.io"}, Resources: []string{"certificatesigningrequests/approval", "certificatesigningrequests/status"}, Verbs: []string{"update"}},
	{APIGroups: []string{"certificates.k8s.io"}, Resources: []string{"signers"}, ResourceNames: []string{AgentServingSigner}, Verbs: []string{"approve", "sign"}},
	{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get", "list", "watch"}},
}

// grant binds a new ClusterRole of rules to users.
func grant(ctx context.Context, name string, rules []rbacv1.PolicyRule, users ...string) {
	GinkgoHelper()
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}
	Expect(env.Client.Create(ctx, role)).To(Succeed())
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
	}
	for _, u := range users {
		binding.Subjects = append(binding.Subjects, rbacv1.Subject{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: u})
	}
	Expect(env.Client.Create(ctx, binding)).To(Succeed())
	DeferCleanup(func() {
		Expect(client.IgnoreNotFound(env.Client.Delete(ctx, binding))).To(Succeed())
		Expect(client.IgnoreNotFound(env.Client.Delete(ctx, role))).To(Succeed())
	})
}

// impersonating is a client of the suite's apiserver acting as user, whose token names
// node (none when node is "").
func impersonating(user, node string) client.Client {
	GinkgoHelper()
	c := rest.CopyConfig(env.Config)
	c.Impersonate = rest.ImpersonationConfig{UserName: user}
	if node != "" {
		c.Impersonate.Extra = map[string][]string{nodeNameExtra: {node}}
	}
	cl, err := client.New(c, client.Options{Scheme: env.Scheme})
	Expect(err).NotTo(HaveOccurred())
	return cl
}

// startSigner runs the signer in a manager of its own, as the signer's process does, with its rights
// only, until the end of the spec.
func startSigner(opts SignerOptions) {
	GinkgoHelper()
	c := rest.CopyConfig(env.Config)
	c.Impersonate = rest.ImpersonationConfig{UserName: testSignerUser}
	mgr, err := ctrl.NewManager(c, ctrl.Options{
		Scheme: env.Scheme, Metrics: metricsserver.Options{BindAddress: "0"},
		Cache:      cache.Options{ByObject: SignerCacheByObject()},
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	Expect(err).NotTo(HaveOccurred())
	opts.Recorder = mgr.GetEventRecorder("numapref-signer")
	Expect(SetupAgentCertSigner(mgr, opts)).To(Succeed())
	env.RunManager(mgr)
}

// ensureNodeWithIP creates Node name with InternalIP ip.
func ensureNodeWithIP(ctx context.Context, name, ip string) {
	GinkgoHelper()
	env.EnsureNode(name)
	node := &corev1.Node{}
	Expect(env.Client.Get(ctx, client.ObjectKey{Name: name}, node)).To(Succeed())
	node.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: ip}}
	Expect(env.Client.Status().Update(ctx, node)).To(Succeed())
}

// requestCSR creates a CSR of signer for a certificate of node signer-a (every requester
// here claims that node) and ip, through c.
func requestCSR(ctx context.Context, c client.Client, name, signer, ip string) {
	GinkgoHelper()
	csr := agentCSR(name, "", servingRequest(GinkgoT(), ecKey(GinkgoT()), "signer-a", []string{ip}, x509.CertificateRequest{}),
		func(c *certificatesv1.CertificateSigningRequest) {
			c.Spec.SignerName = signer
			c.Spec.ExpirationSeconds = ptr.To[int32](3600)
		})
	Expect(c.Create(ctx, csr)).To(Succeed())
	DeferCleanup(func() { Expect(client.IgnoreNotFound(env.Client.Delete(ctx, csr))).To(Succeed()) })
}

// getCSR reads a CSR from the API.
func getCSR(ctx context.Context, g Gomega, name string) *certificatesv1.CertificateSigningRequest {
	csr := &certificatesv1.CertificateSigningRequest{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Name: name}, csr)).To(Succeed())
	return csr
}

// csrDecided is the type and reason of a CSR's Approved or Denied condition ("" if none).
func csrDecided(csr *certificatesv1.CertificateSigningRequest) (certificatesv1.RequestConditionType, string) {
	for _, c := range csr.Status.Conditions {
		if c.Type == certificatesv1.CertificateApproved || c.Type == certificatesv1.CertificateDenied {
			return c.Type, c.Reason
		}
	}
	return "", ""
}

var _ = Describe("Signer of the agents' serving certificates", func() {
	ctx := context.Background()
	const otherUser = "system:serviceaccount:numapref-system:other"
	var (
		caPEM         []byte
		opts          SignerOptions
		agentA, other client.Client
	)

	BeforeEach(func() {
		ensureNodeWithIP(ctx, "signer-a", "10.1.0.1")
		ensureNodeWithIP(ctx, "signer-b", "10.1.0.2")
		var keyPEM []byte
		caPEM, keyPEM = testSignerCA(GinkgoT(), time.Now().Add(24*time.Hour), true)
		opts = SignerOptions{CACertPEM: caPEM, CAKeyPEM: keyPEM, AgentNamespace: "numapref-system", AgentServiceAccount: "numapref-agent"}
		grant(ctx, "numapref-signer-test", signerRules, testSignerUser)
		grant(ctx, "numapref-signer-test-events", []rbacv1.PolicyRule{
			{APIGroups: []string{"events.k8s.io"}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}},
		}, testSignerUser)
		grant(ctx, "numapref-signer-test-requesters", []rbacv1.PolicyRule{
			{APIGroups: []string{"certificates.k8s.io"}, Resources: []string{"certificatesigningrequests"}, Verbs: []string{"create"}},
		}, testAgentRequester, otherUser)
		agentA = impersonating(testAgentRequester, "signer-a")
		other = impersonating(otherUser, "signer-a")
	})

	It("signs a node's own names for its agent, and denies the rest", func() {
		requestCSR(ctx, agentA, "signer-foreign", "example.com/other", "10.1.0.1")
		startSigner(opts)
		requestCSR(ctx, agentA, "signer-own", AgentServingSigner, "10.1.0.1")
		requestCSR(ctx, agentA, "signer-b-ip", AgentServingSigner, "10.1.0.2")
		requestCSR(ctx, other, "signer-other-user", AgentServingSigner, "10.1.0.1")

		By("A's request for A's IP is approved and signed by the CA")
		var issued []byte
		Eventually(func(g Gomega) {
			csr := getCSR(ctx, g, "signer-own")
			t, reason := csrDecided(csr)
			g.Expect([]string{string(t), reason}).To(Equal([]string{string(certificatesv1.CertificateApproved), CSRReasonAgentNode}))
			g.Expect(csr.Status.Certificate).NotTo(BeEmpty())
			issued = csr.Status.Certificate
		}).Should(Succeed())
		block, _ := pem.Decode(issued)
		Expect(block).NotTo(BeNil())
		cert, err := x509.ParseCertificate(block.Bytes)
		Expect(err).NotTo(HaveOccurred())
		roots := x509.NewCertPool()
		Expect(roots.AppendCertsFromPEM(caPEM)).To(BeTrue())
		_, err = cert.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
		Expect(err).NotTo(HaveOccurred())
		Expect(cert.IPAddresses).To(HaveLen(1))
		Expect(cert.IPAddresses[0].Equal(net.ParseIP("10.1.0.1"))).To(BeTrue(), "IP SAN %v", cert.IPAddresses)
		Expect(cert.NotAfter).To(BeTemporally("~", time.Now().Add(time.Hour), time.Minute), "expirationSeconds bounds it")

		By("A's request naming B's IP, and another user's request, are denied, unsigned")
		for name, want := range map[string]string{"signer-b-ip": CSRReasonSANsNotNodes, "signer-other-user": CSRReasonWrongRequester} {
			Eventually(func(g Gomega) {
				csr := getCSR(ctx, g, name)
				t, reason := csrDecided(csr)
				g.Expect([]string{string(t), reason}).To(Equal([]string{string(certificatesv1.CertificateDenied), want}))
				g.Expect(csr.Status.Certificate).To(BeEmpty())
			}).Should(Succeed(), name)
		}

		By("the denial is an Event on the CSR")
		Eventually(func(g Gomega) {
			var events eventsv1.EventList
			g.Expect(env.Client.List(ctx, &events)).To(Succeed())
			var reasons []string
			for _, e := range events.Items {
				if e.Regarding.Kind == "CertificateSigningRequest" && e.Regarding.Name == "signer-b-ip" {
					reasons = append(reasons, e.Type+"/"+e.Reason)
				}
			}
			g.Expect(reasons).To(ContainElement(corev1.EventTypeWarning + "/" + CSRReasonSANsNotNodes))
		}).Should(Succeed())

		By("another signer's request is left alone")
		Consistently(func(g Gomega) {
			csr := getCSR(ctx, g, "signer-foreign")
			g.Expect(csr.Status.Conditions).To(BeEmpty())
			g.Expect(csr.Status.Certificate).To(BeEmpty())
		}, "500ms").Should(Succeed())
	})

	It("denies a node an InternalIP another Node reports too, which root on it wrote into its own status", func() {
		node := &corev1.Node{}
		Expect(env.Client.Get(ctx, client.ObjectKey{Name: "signer-a"}, node)).To(Succeed())
		node.Status.Addresses = append(node.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "10.1.0.2"})
		Expect(env.Client.Status().Update(ctx, node)).To(Succeed())
		DeferCleanup(func() { ensureNodeWithIP(ctx, "signer-a", "10.1.0.1") })
		startSigner(opts)
		requestCSR(ctx, agentA, "signer-claims-b-ip", AgentServingSigner, "10.1.0.2")
		Eventually(func(g Gomega) {
			csr := getCSR(ctx, g, "signer-claims-b-ip")
			t, reason := csrDecided(csr)
			g.Expect([]string{string(t), reason}).To(Equal([]string{string(certificatesv1.CertificateDenied), CSRReasonSANsNotNodes}))
			g.Expect(csr.Status.Conditions[0].Message).To(ContainSubstring("also reported by Node signer-b"))
			g.Expect(csr.Status.Certificate).To(BeEmpty())
		}).Should(Succeed())
	})

	It("fails, unsigned, a request someone else approved that names another node", func() {
		requestCSR(ctx, agentA, "signer-approved-b", AgentServingSigner, "10.1.0.2")
		csr := &certificatesv1.CertificateSigningRequest{}
		Expect(env.Client.Get(ctx, client.ObjectKey{Name: "signer-approved-b"}, csr)).To(Succeed())
		csr.Status.Conditions = append(csr.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
			Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue, Reason: "ByHand"})
		Expect(env.Client.SubResource("approval").Update(ctx, csr)).To(Succeed())
		startSigner(opts)
		Eventually(func(g Gomega) {
			csr := getCSR(ctx, g, "signer-approved-b")
			g.Expect(hasCSRCondition(csr, certificatesv1.CertificateFailed)).To(BeTrue(), "conditions %v", csr.Status.Conditions)
		}).Should(Succeed())
		Consistently(func(g Gomega) {
			g.Expect(getCSR(ctx, g, "signer-approved-b").Status.Certificate).To(BeEmpty())
		}, "500ms").Should(Succeed())
	})

	It("decides each request once with two replicas running", func() {
		startSigner(opts)
		startSigner(opts)
		names := []string{"signer-twice-0", "signer-twice-1", "signer-twice-2", "signer-twice-3"}
		for i, name := range names {
			c := agentA
			if i%2 == 1 {
				c = other
			}
			requestCSR(ctx, c, name, AgentServingSigner, "10.1.0.1")
		}
		certs := map[string][]byte{}
		for i, name := range names {
			Eventually(func(g Gomega) {
				csr := getCSR(ctx, g, name)
				g.Expect(csr.Status.Conditions).To(HaveLen(1), "one decision")
				if i%2 == 1 {
					g.Expect(csr.Status.Conditions[0].Type).To(Equal(certificatesv1.CertificateDenied))
					return
				}
				g.Expect(csr.Status.Conditions[0].Type).To(Equal(certificatesv1.CertificateApproved))
				g.Expect(csr.Status.Certificate).NotTo(BeEmpty())
				certs[name] = csr.Status.Certificate
			}).Should(Succeed(), name)
		}
		Consistently(func(g Gomega) {
			for _, name := range names {
				csr := getCSR(ctx, g, name)
				g.Expect(csr.Status.Conditions).To(HaveLen(1), name)
				g.Expect(csr.Status.Certificate).To(Equal(certs[name]), name)
			}
		}, "500ms").Should(Succeed())
	})
})

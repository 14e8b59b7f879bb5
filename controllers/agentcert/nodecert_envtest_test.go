// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build integration

package agentcert

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// The agent's side and the signer's together, on a real apiserver: the agent of node A
// (the agents' ServiceAccount, A's node-name claim, the agent role's CSR rights) asks for its
// node certificate and serves what the signer issued, which names A and verifies with the CA.
var _ = Describe("An agent's node certificate", func() {
	ctx := context.Background()

	It("is asked for by the agent and signed by the signer", func() {
		ensureNodeWithIP(ctx, "nodecert-a", "10.2.0.1")
		caPEM, keyPEM := testSignerCA(GinkgoT(), time.Now().Add(24*time.Hour), true)
		grant(ctx, "numapref-nodecert-signer", signerRules, testSignerUser)
		// The agent's generated rights: get on Nodes, get and create on CSRs.
		grant(ctx, "numapref-nodecert-agent", []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get"}},
			{APIGroups: []string{"certificates.k8s.io"}, Resources: []string{"certificatesigningrequests"}, Verbs: []string{"get", "create"}},
		}, testAgentRequester)
		startSigner(SignerOptions{CACertPEM: caPEM, CAKeyPEM: keyPEM, AgentNamespace: "numapref-system", AgentServiceAccount: "numapref-agent"})

		c := rest.CopyConfig(env.Config)
		c.Impersonate = rest.ImpersonationConfig{UserName: testAgentRequester, Extra: map[string][]string{nodeNameExtra: {"nodecert-a"}}}
		cs, err := kubernetes.NewForConfig(c)
		Expect(err).NotTo(HaveOccurred())
		nc := &NodeCertificate{Client: cs, Node: "nodecert-a", Lifetime: time.Hour, Log: GinkgoLogr}
		runCtx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- nc.Start(runCtx) }()
		DeferCleanup(func() { cancel(); Expect(<-done).To(Succeed()) })

		var served *tls.Certificate
		Eventually(func() error {
			served, err = nc.GetCertificate(nil)
			return err
		}).WithTimeout(30 * time.Second).Should(Succeed())
		roots := x509.NewCertPool()
		Expect(roots.AppendCertsFromPEM(caPEM)).To(BeTrue())
		_, err = served.Leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: "nodecert-a", KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
		Expect(err).NotTo(HaveOccurred())
		Expect(served.Leaf.VerifyHostname("10.2.0.1")).To(Succeed())
		Expect(served.Leaf.NotAfter).To(BeTemporally("<=", time.Now().Add(time.Hour+time.Minute)))
	})
})

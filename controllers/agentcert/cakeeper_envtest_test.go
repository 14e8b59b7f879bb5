// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build integration

package agentcert

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/numapref/numapref/internal/inspect"
)

// signerNamespaceRules are the chart's signer Role (templates/signer.yaml): the Secrets and
// ConfigMap it keeps, by name, creating them, its own ServiceAccount, the scraper's token.
func signerNamespaceRules(caSecret, scraperSecret, scraperSA, owner string) []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{caSecret, scraperSecret}, Verbs: []string{"get", "update"}},
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{inspect.CAConfigMap}, Verbs: []string{"get", "update"}},
		{APIGroups: []string{""}, Resources: []string{"secrets", "configmaps"}, Verbs: []string{"create"}},
		{APIGroups: []string{""}, Resources: []string{"serviceaccounts"}, ResourceNames: []string{owner}, Verbs: []string{"get"}},
		{APIGroups: []string{""}, Resources: []string{"serviceaccounts/token"}, ResourceNames: []string{scraperSA}, Verbs: []string{"create"}},
	}
}

var _ = Describe("The signer's own CA, its publication and the scraper's token", func() {
	ctx := context.Background()

	It("makes the CA once, in a Secret owned by its ServiceAccount, publishes it, and keeps a scraper token that only the agents take", func() {
		ns := env.NewNamespace(ctx)
		for _, name := range []string{"signer", "scraper"} {
			Expect(env.Client.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}})).To(Succeed())
		}
		role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "signer"}, Rules: signerNamespaceRules("ca", "scraper-token", "scraper", "signer")}
		Expect(env.Client.Create(ctx, role)).To(Succeed())
		Expect(env.Client.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "signer"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "signer"},
			Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: testSignerUser}}})).To(Succeed())
		as := impersonating(testSignerUser, "")

		owners, err := OwnedBy(ctx, as, ns, "signer")
		Expect(err).NotTo(HaveOccurred())
		keeper := CASecret{Namespace: ns, Name: "ca", Owners: owners}
		cert, key, err := keeper.Ensure(ctx, as, time.Now())
		Expect(err).NotTo(HaveOccurred())
		ca, err := parseSignerCA(cert, key)
		Expect(err).NotTo(HaveOccurred())
		Expect(ca.cert.IsCA).To(BeTrue())
		again, _, err := keeper.Ensure(ctx, as, time.Now())
		Expect(err).NotTo(HaveOccurred())
		Expect(again).To(Equal(cert), "a second start keeps the CA")
		var sec corev1.Secret
		Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "ca"}, &sec)).To(Succeed())
		Expect(sec.OwnerReferences).To(HaveLen(1))
		Expect(sec.OwnerReferences[0].Kind).To(Equal("ServiceAccount"))
		Expect(sec.Type).To(Equal(corev1.SecretTypeTLS))

		pubCtx, stop := context.WithCancel(ctx)
		DeferCleanup(stop)
		go func() {
			defer GinkgoRecover()
			pub := &CAPublisher{Client: as, Namespace: ns, Name: inspect.CAConfigMap, CACert: cert,
				Data: map[string]string{inspect.CAConfigMapVerifyKey: "node"}, Owners: owners, Interval: 100 * time.Millisecond, Log: GinkgoLogr}
			Expect(pub.Start(pubCtx)).To(Succeed())
		}()
		published := func(g Gomega) map[string]string {
			var cm corev1.ConfigMap
			g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: inspect.CAConfigMap}, &cm)).To(Succeed())
			return cm.Data
		}
		want := map[string]string{inspect.CAConfigMapCAKey: string(cert), inspect.CAConfigMapVerifyKey: "node"}
		Eventually(published).Should(Equal(want))
		By("deleted, as a helm upgrade from a release that rendered it does, it is back")
		Expect(env.Client.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: inspect.CAConfigMap}})).To(Succeed())
		Eventually(published).Should(Equal(want))

		go func() {
			defer GinkgoRecover()
			tok := &ScraperToken{Client: as, Namespace: ns, ServiceAccount: "scraper", Secret: "scraper-token",
				Lifetime: 10 * time.Minute, Owners: owners, Log: GinkgoLogr}
			Expect(tok.Start(pubCtx)).To(Succeed())
		}()
		var token string
		Eventually(func(g Gomega) {
			var s corev1.Secret
			g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "scraper-token"}, &s)).To(Succeed())
			token = string(s.Data["token"])
			g.Expect(token).NotTo(BeEmpty())
		}).Should(Succeed())
		review := func(audiences ...string) authenticationv1.TokenReviewStatus {
			tr := &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token, Audiences: audiences}}
			Expect(env.Client.Create(ctx, tr)).To(Succeed())
			return tr.Status
		}
		st := review(AgentAudience)
		Expect(st.Authenticated).To(BeTrue(), "the agents' audience: %+v", st)
		Expect(st.User.Username).To(Equal("system:serviceaccount:" + ns + ":scraper"))
		Expect(review().Authenticated).To(BeFalse(), "the API server's own audience refuses it")
	})
})

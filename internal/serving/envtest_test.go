// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build integration

package serving

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/numapref/numapref/internal/testutil/sharedenv"
)

// A real kube-apiserver and etcd (envtest) for the integration tier, started by the first
// test or benchmark that needs them.
var env = &sharedenv.Env{}

func TestMain(m *testing.M) { env.Main(m) }

// apiServer returns an admin config and client of the shared envtest API server.
func apiServer(t testing.TB) (*rest.Config, kubernetes.Interface) {
	t.Helper()
	return env.Start(t)
}

// countingTokens counts the TokenReviews that reach the API server.
type countingTokens struct {
	TokenReviewer
	n atomic.Int64
}

func (c *countingTokens) Create(ctx context.Context, tr *authenticationv1.TokenReview, opts metav1.CreateOptions) (*authenticationv1.TokenReview, error) {
	c.n.Add(1)
	return c.TokenReviewer.Create(ctx, tr, opts)
}

// serviceAccountToken creates service account users/name and a token of it for audiences
// (none: the API server's own).
func serviceAccountToken(t testing.TB, cs kubernetes.Interface, name string, audiences ...string) string {
	t.Helper()
	ctx := context.Background()
	const ns = "users"
	if _, err := cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); err != nil {
		if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := cs.CoreV1().ServiceAccounts(ns).Get(ctx, name, metav1.GetOptions{}); err != nil {
		if _, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{Audiences: audiences, ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tr.Status.Token
}

// mayGetPaths lets service account users/name get paths (non-resource URLs).
func mayGetPaths(t *testing.T, cs kubernetes.Interface, name string, paths ...string) {
	t.Helper()
	ctx := context.Background()
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "get-" + name},
		Rules: []rbacv1.PolicyRule{{Verbs: []string{"get"}, NonResourceURLs: paths}}}
	if _, err := cs.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "get-" + name},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: "users", Name: name}}}
	if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestLearnTokenPolicyFromTheAPIServer: from an agent's own token (requested without
// audiences, as kubelet projects it) the policy is the issuer and the API server's
// audiences of the tokens the API server issues, and the issuer's keys, read with the
// agent's own credential; from a credential that is no token (the admin's client
// certificate) the issuer comes from the discovery document, and the audiences are said to
// be unknown. Real tokens pass the learned policy, their signatures checked against the
// API server's real keys; the same claims with the signature "AA", or signed by another
// key under the real key's id, do not.
func TestLearnTokenPolicyFromTheAPIServer(t *testing.T) {
	cfg, cs := apiServer(t)
	ctx := context.Background()
	agentToken := serviceAccountToken(t, cs, "agent")
	agentCfg := rest.AnonymousClientConfig(cfg)
	agentCfg.BearerToken = agentToken
	agentCS, err := kubernetes.NewForConfig(agentCfg)
	if err != nil {
		t.Fatal(err)
	}
	p, skipped := LearnTokenPolicy(ctx, agentCfg, agentCS.Discovery().RESTClient())
	if p.Issuer == "" || len(p.APIAudiences) == 0 || len(skipped) != 0 {
		t.Fatalf("from the agent's token: %+v, skipped %q; want issuer and API audiences", p, skipped)
	}
	now := time.Now()
	real := serviceAccountToken(t, cs, "alice", AgentAudience)
	if err := p.check(ctx, real, AgentAudience, now); err != nil {
		t.Errorf("a real agent-audience token: %v", err)
	}
	if err := p.check(ctx, serviceAccountToken(t, cs, "alice"), APIServerAudience, now); err != nil {
		t.Errorf("a real API-server token: %v", err)
	}
	for name, forged := range map[string]string{
		"signature AA":                 withSignature(real, "AA"),
		"another key, the real key id": signWith(signingKey{kid: keyIDOf(t, real), alg: "RS256", key: otherKey().key}, rs256, claimsOf(p.Issuer, "alice", AgentAudience)),
		"payload changed":              tamper(real),
	} {
		if err := p.check(ctx, forged, AgentAudience, now); !errors.Is(err, errJunkToken) {
			t.Errorf("forged, %s: %v, want a junk token", name, err)
		}
	}

	fromDiscovery, skipped := LearnTokenPolicy(ctx, cfg, cs.Discovery().RESTClient())
	if fromDiscovery.Issuer != p.Issuer || fromDiscovery.APIAudiences != nil || len(skipped) != 1 || !strings.Contains(skipped[0], "audiences") {
		t.Errorf("from the discovery document: %+v, skipped %q; want issuer %q and the audiences unknown", fromDiscovery, skipped, p.Issuer)
	}
}

// TestJunkTokensMakeNoReviewOfTheAPIServer: the agent's server against a real API server.
// Alice's token is reviewed once; 2,000 junk tokens made from the cluster's real claims
// (expired, other audience, garbage, ...) make no TokenReview; 2,000 forged ones (alg
// RS256, the real key's id, right claims, the signature "AA") make none either, each
// refused with 401; Alice is then still served, with no new review.
func TestJunkTokensMakeNoReviewOfTheAPIServer(t *testing.T) {
	cfg, cs := apiServer(t)
	ctx := context.Background()
	agentCfg := rest.AnonymousClientConfig(cfg)
	agentCfg.BearerToken = serviceAccountToken(t, cs, "agent")
	policy, skipped := LearnTokenPolicy(ctx, agentCfg, cs.Discovery().RESTClient())
	if len(skipped) != 0 {
		t.Fatalf("policy %+v: not learned: %q", policy, skipped)
	}
	tokens := &countingTokens{TokenReviewer: cs.AuthenticationV1().TokenReviews()}
	clk := clocktesting.NewFakePassiveClock(time.Now())
	auth, err := NewAuth(AuthOptions{Tokens: tokens, Access: cs.AuthorizationV1().SubjectAccessReviews(),
		TTLs: DefaultCacheTTLs(), Policy: policy, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	addr := startServer(t, Options{Auth: auth,
		Routes: AgentRoutes(http.HandlerFunc(ok), "/inspect/", http.HandlerFunc(ok), false)})
	mayGetPaths(t, cs, "alice", "/metrics")
	alice := serviceAccountToken(t, cs, "alice", AgentAudience)
	c := insecureClient()
	base := "https://" + addr
	aliceIsServed := func(when string) {
		t.Helper()
		if status, body := get(t, c, base+"/metrics", alice); status != http.StatusOK {
			t.Fatalf("%s: alice: %d %q, want 200", when, status, body)
		}
	}
	aliceIsServed("before the flood")
	if n := tokens.n.Load(); n != 1 {
		t.Fatalf("%d TokenReviews for alice, want 1", n)
	}

	for i, junk := range junkFlood(policy.Issuer, 2000) {
		if status, body := get(t, c, base+"/metrics", junk); status != http.StatusUnauthorized {
			t.Fatalf("junk token %d: %d %q, want 401", i, status, body)
		}
	}
	if n := tokens.n.Load() - 1; n != 0 {
		t.Errorf("2,000 junk tokens made %d TokenReviews, want none", n)
	}

	kid := keyIDOf(t, alice)
	for i := range 2000 {
		claims := claimsOf(policy.Issuer, fmt.Sprintf("system:serviceaccount:users:forger-%d", i), AgentAudience)
		forged := jwsPart(map[string]any{"alg": "RS256", "kid": kid}) + "." + jwsPart(claims) + ".AA"
		if status, body := get(t, c, base+"/metrics", forged); status != http.StatusUnauthorized {
			t.Fatalf("forged token %d: %d %q, want 401", i, status, body)
		}
	}
	if n := tokens.n.Load() - 1; n != 0 {
		t.Errorf("2,000 forged tokens made %d TokenReviews, want none", n)
	}
	aliceIsServed("after the floods")
	if n := tokens.n.Load() - 1; n != 0 {
		t.Errorf("alice's request after the floods made %d TokenReviews, want none (cached)", n)
	}
}

// BenchmarkJunkTokenAPIServer: BenchmarkJunkToken against a real API server and its keys:
// review is what a forged token would cost without the signature check.
func BenchmarkJunkTokenAPIServer(b *testing.B) {
	cfg, cs := apiServer(b)
	agentCfg := rest.AnonymousClientConfig(cfg)
	agentCfg.BearerToken = serviceAccountToken(b, cs, "agent")
	policy, skipped := LearnTokenPolicy(context.Background(), agentCfg, cs.Discovery().RESTClient())
	if len(skipped) != 0 {
		b.Fatalf("policy %+v: not learned: %q", policy, skipped)
	}
	tokens := &countingTokens{TokenReviewer: cs.AuthenticationV1().TokenReviews()}
	a, err := NewAuth(AuthOptions{Tokens: tokens, Access: cs.AuthorizationV1().SubjectAccessReviews(),
		TTLs: DefaultCacheTTLs(), Policy: policy, ReviewRate: ReviewRate{PerSecond: 1e9, Burst: 1 << 30}})
	if err != nil {
		b.Fatal(err)
	}
	// Forged tokens name the issuer's real key: their signatures are checked against it.
	valid := serviceAccountToken(b, cs, "alice", AgentAudience)
	kid := map[string]any{"alg": "RS256", "kid": keyIDOf(b, valid)}
	benchmarkJunkToken(b, a, tokens.count, junkTokensOf(policy.Issuer, 0)["expired"], valid, func(i int) string {
		return jwt(kid, claimsOf(policy.Issuer, fmt.Sprintf("forger-%d", i), AgentAudience))
	})
}

func (c *countingTokens) count() int { return int(c.n.Load()) }

// keyIDOf is the kid of token's header.
func keyIDOf(t testing.TB, token string) string {
	t.Helper()
	header, _, _ := strings.Cut(token, ".")
	raw, err := base64.RawURLEncoding.DecodeString(header)
	if err != nil {
		t.Fatal(err)
	}
	var h struct {
		Kid string `json:"kid"`
	}
	if err := json.Unmarshal(raw, &h); err != nil || h.Kid == "" {
		t.Fatalf("the header %s names no key: %v", raw, err)
	}
	return h.Kid
}

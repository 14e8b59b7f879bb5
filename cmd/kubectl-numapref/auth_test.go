// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build integration

package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/go-logr/logr/testr"
	"github.com/google/go-cmp/cmp"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/numapref/numapref/internal/inspect"
	"github.com/numapref/numapref/internal/serving"
	"github.com/numapref/numapref/internal/testutil/builders"
	"github.com/numapref/numapref/internal/testutil/testcerts"
)

// agentServerName is the name the test agents' certificate carries, as the chart's does
// (<release>-numapref-agent.<namespace>.svc): not an address the plugin dials.
const agentServerName = "np-numapref-agent.numapref-system.svc"

// cannedDescriber answers for db-0 in any namespace; it counts the requests that got
// through.
type cannedDescriber struct{ calls atomic.Int32 }

func (d *cannedDescriber) Describe(_ context.Context, namespace, name string) (*inspect.Pod, error) {
	d.calls.Add(1)
	if name != "db-0" {
		return nil, fmt.Errorf("pod %s/%s is not known on node node-a: %w", namespace, name, inspect.ErrNotFound)
	}
	p := samplePod()
	p.Namespace = namespace
	return p, nil
}

// startAgentServer runs the agent's server as the agent configures it (internal/serving:
// the agent's routes, its certificate from a directory, the reviews against the API
// server at cfg) with d behind inspect, publishes the CA as the chart does (the ConfigMap,
// readable by every authenticated user), and returns the server's port.
func startAgentServer(t *testing.T, cfg *rest.Config, cs kubernetes.Interface, d inspect.Describer) int {
	t.Helper()
	ca := testcerts.NewCA(t, "numapref-agent-ca")
	dir := t.TempDir()
	testcerts.WriteSecretDir(t, dir, ca.Issue(t, []string{agentServerName}, nil))
	publishCA(t, cs, ca.PEM)

	auth := agentAuth(t, cfg)
	metrics := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "numapref_up 1") })
	srv, err := serving.NewServer(serving.Options{
		BindAddress: "127.0.0.1:0", CertDir: dir, Auth: auth, Limits: serving.DefaultLimits(), Log: testr.New(t),
		Routes: serving.AgentRoutes(metrics, inspect.PathPrefix, inspect.NewHandler(d, auth), false),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("agent server: %v", err)
		}
	})
	eventually(t, "the agent server listens", func() error {
		if srv.Addr() == "" {
			return fmt.Errorf("no address yet")
		}
		return nil
	})
	_, p, err := net.SplitHostPort(srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	port, err := strconv.Atoi(p)
	if err != nil {
		t.Fatal(err)
	}
	return port
}

// publishCA writes the CA ConfigMap and lets every authenticated user read it, as the
// chart does.
func publishCA(t *testing.T, cs kubernetes.Interface, caPEM []byte) {
	t.Helper()
	ctx := context.Background()
	ensureNamespace(t, cs, defaultAgentNamespace)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: defaultAgentNamespace, Name: inspect.CAConfigMap},
		Data: map[string]string{inspect.CAConfigMapCAKey: string(caPEM), inspect.CAConfigMapNameKey: agentServerName}}
	if _, err := cs.CoreV1().ConfigMaps(defaultAgentNamespace).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cs.CoreV1().ConfigMaps(defaultAgentNamespace).Delete(ctx, inspect.CAConfigMap, metav1.DeleteOptions{})
	})
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: defaultAgentNamespace, Name: "agent-ca-viewer"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{inspect.CAConfigMap}, Verbs: []string{"get"}}}}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: defaultAgentNamespace, Name: "agent-ca-viewer"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "agent-ca-viewer"},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: "system:authenticated"}}}
	if _, err := cs.RbacV1().Roles(defaultAgentNamespace).Create(ctx, role, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	if _, err := cs.RbacV1().RoleBindings(defaultAgentNamespace).Create(ctx, binding, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

// inspectReaderRole is the ClusterRole config/rbac ships, as a cluster admin applies it.
func inspectReaderRole(t *testing.T) *rbacv1.ClusterRole {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "config", "rbac", "inspect-reader-role.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var role rbacv1.ClusterRole
	if err := yaml.UnmarshalStrict(b, &role); err != nil {
		t.Fatal(err)
	}
	return &role
}

// grant creates a Role in namespace with rules and binds it to service account users/sa.
func grant(t *testing.T, cs kubernetes.Interface, namespace, name string, rules []rbacv1.PolicyRule, sa string) {
	t.Helper()
	ctx := context.Background()
	ensureNamespace(t, cs, namespace)
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}, Rules: rules}
	if _, err := cs.RbacV1().Roles(namespace).Create(ctx, role, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name + "-" + sa},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: "users", Name: sa}}}
	if _, err := cs.RbacV1().RoleBindings(namespace).Create(ctx, rb, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

// waitAllowed polls until the API server allows user what spec says.
func waitAllowed(t *testing.T, cs kubernetes.Interface, user string, spec authorizationv1.SubjectAccessReviewSpec) {
	t.Helper()
	spec.User = user
	spec.Groups = []string{"system:serviceaccounts", "system:authenticated"}
	eventually(t, user+" is allowed "+fmt.Sprint(spec.NonResourceAttributes, spec.ResourceAttributes), func() error {
		r, err := cs.AuthorizationV1().SubjectAccessReviews().Create(context.Background(), &authorizationv1.SubjectAccessReview{Spec: spec}, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		if !r.Status.Allowed {
			return fmt.Errorf("not yet: %s", r.Status.Reason)
		}
		return nil
	})
}

func mayMintOwnToken(name string) []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"serviceaccounts/token"}, ResourceNames: []string{name}, Verbs: []string{"create"}}}
}

var getPods = []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get"}}}

// adminKubeconfig is a kubeconfig of the envtest admin, who authenticates with a client
// certificate: a user who is no service account.
func adminKubeconfig(t *testing.T, cfg *rest.Config) string {
	t.Helper()
	if len(cfg.CertData) == 0 {
		t.Fatal("the envtest admin has no client certificate")
	}
	return writeKubeconfigFor(t, cfg, &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData})
}

// TestInspectThroughTheAgentsAuth runs the plugin against the agent's real server (its
// routes, TLS, TokenReview with the audience, both SubjectAccessReviews) and the shipped
// ClusterRole, all against a real API server: the plugin discovers the agent, verifies
// its certificate with the published CA and name while dialling an IP, sends a token
// minted for the agent's audience, and the agent answers a user only for the namespaces
// where the user may get pods.
func TestInspectThroughTheAgentsAuth(t *testing.T) {
	cfg, cs := apiServer(t)
	d := &cannedDescriber{}
	port := startAgentServer(t, cfg, cs, d)
	const node = "auth-node"
	createPod(t, cs, builders.MakePod("shop", "db-0").Node(node).Containers("main").Obj())
	createPod(t, cs, builders.MakePod("vault", "db-0").Node(node).Containers("main").Obj())
	createPod(t, cs, agentPod("agent-auth", node, int32(port), runningAgent("127.0.0.1")))

	// reader: may inspect, may get pods in shop but not in vault, may mint its own token.
	// stranger: may get pods and mint, not inspect. nominter: may inspect, not mint.
	readerToken := serviceAccountToken(t, cs, "users", "reader")
	strangerToken := serviceAccountToken(t, cs, "users", "stranger")
	nominterToken := serviceAccountToken(t, cs, "users", "nominter")
	bindClusterRole(t, cs, inspectReaderRole(t), "users", "reader")
	bindClusterRole(t, cs, inspectReaderRole(t), "users", "nominter")
	grant(t, cs, "shop", "get-pods", getPods, "reader")
	grant(t, cs, "shop", "get-pods", getPods, "stranger")
	grant(t, cs, "shop", "get-pods", getPods, "nominter")
	listAgents := []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"list"}}}
	for _, sa := range []string{"reader", "stranger", "nominter"} {
		grant(t, cs, defaultAgentNamespace, "list-agents", listAgents, sa)
	}
	grant(t, cs, "users", "mint-reader", mayMintOwnToken("reader"), "reader")
	grant(t, cs, "users", "mint-stranger", mayMintOwnToken("stranger"), "stranger")
	// The API server's RBAC reads bindings through informers: wait until it applies the
	// last of each kind, so the agent's reviews (and its cache of denials) see them all.
	waitAllowed(t, cs, "system:serviceaccount:users:reader", authorizationv1.SubjectAccessReviewSpec{
		NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: inspect.Path("shop", "db-0"), Verb: "get"}})
	waitAllowed(t, cs, "system:serviceaccount:users:nominter", authorizationv1.SubjectAccessReviewSpec{
		NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: inspect.Path("shop", "db-0"), Verb: "get"}})
	waitAllowed(t, cs, "system:serviceaccount:users:stranger", authorizationv1.SubjectAccessReviewSpec{
		ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: "users", Verb: "create", Resource: "serviceaccounts", Subresource: "token", Name: "stranger"}})
	reader, stranger, nominter := writeKubeconfig(t, cfg, readerToken), writeKubeconfig(t, cfg, strangerToken), writeKubeconfig(t, cfg, nominterToken)
	agentURL := fmt.Sprintf("https://127.0.0.1:%d", port)

	plugin := func(args ...string) (int, string, string) {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), append([]string{"inspect"}, args...), &stdout, &stderr)
		return code, stdout.String(), stderr.String()
	}
	// raw asks the agent directly, verifying its certificate as the plugin does.
	roots := x509.NewCertPool()
	cm, err := cs.CoreV1().ConfigMaps(defaultAgentNamespace).Get(context.Background(), inspect.CAConfigMap, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	roots.AppendCertsFromPEM([]byte(cm.Data[inspect.CAConfigMapCAKey]))
	verified := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, ServerName: agentServerName}}}
	raw := func(path, token string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, agentURL+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := verified.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	agentAudienceToken := func(sa string) string {
		t.Helper()
		tr, err := cs.CoreV1().ServiceAccounts("users").CreateToken(context.Background(), sa, &authenticationv1.TokenRequest{
			Spec: authenticationv1.TokenRequestSpec{Audiences: []string{inspect.Audience}, ExpirationSeconds: ptr.To[int64](600)}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return tr.Status.Token
	}

	t.Run("pods of a namespace the user may read: 200, of another: 403", func(t *testing.T) {
		token := agentAudienceToken("reader")
		if status, body := raw(inspect.Path("shop", "db-0"), token); status != http.StatusOK {
			t.Errorf("shop/db-0: %d %s, want 200", status, body)
		}
		status, body := raw(inspect.Path("vault", "db-0"), token)
		if status != http.StatusForbidden || !strings.Contains(body, "system:serviceaccount:users:reader may not get pods in namespace vault") {
			t.Errorf("vault/db-0: %d %s, want 403 naming the namespace", status, body)
		}
		// Refused before the pod is looked up: nothing tells whether it exists.
		if status, _ := raw(inspect.Path("vault", "ghost"), token); status != http.StatusForbidden {
			t.Errorf("vault/ghost: %d, want 403 as for a pod that exists", status)
		}
	})
	t.Run("no token: 401", func(t *testing.T) {
		if status, _ := raw(inspect.Path("shop", "db-0"), ""); status != http.StatusUnauthorized {
			t.Errorf("status %d, want 401", status)
		}
	})
	t.Run("a token for the API server: 401 on inspect, 200 on /metrics", func(t *testing.T) {
		if status, body := raw(inspect.Path("shop", "db-0"), readerToken); status != http.StatusUnauthorized || !strings.Contains(body, "audience numapref-agent") {
			t.Errorf("inspect: %d %s, want 401 asking for the agent's audience", status, body)
		}
		// As Prometheus scrapes with its pod's token, once bound to the metrics reader.
		bindClusterRole(t, cs, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "test-metrics-reader"},
			Rules: []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}}}, "users", "reader")
		eventually(t, "/metrics lets the API server token through", func() error {
			if status, body := raw("/metrics", readerToken); status != http.StatusOK || !strings.Contains(body, "numapref_up 1") {
				return fmt.Errorf("%d %s", status, body)
			}
			return nil
		})
	})
	t.Run("an invalid token: 401", func(t *testing.T) {
		if status, _ := raw(inspect.Path("shop", "db-0"), "not-a-token"); status != http.StatusUnauthorized {
			t.Errorf("status %d, want 401", status)
		}
	})
	t.Run("a user without the inspect role: 403", func(t *testing.T) {
		code, _, stderr := plugin("shop/db-0", "--kubeconfig", stranger)
		if code != 1 || !strings.Contains(stderr, "refused (403 Authorization denied for user system:serviceaccount:users:stranger") ||
			!strings.Contains(stderr, "inspect-reader") {
			t.Errorf("exit %d, stderr %q; want 1 with the 403 and the role to bind", code, stderr)
		}
	})
	t.Run("a service account that may not mint its token: told what to grant, nothing sent", func(t *testing.T) {
		code, _, stderr := plugin("shop/db-0", "--kubeconfig", nominter)
		if code != 1 || !strings.Contains(stderr, "serviceaccounts/token with resourceNames [nominter] in namespace users") {
			t.Errorf("exit %d, stderr %q; want the missing permission explained", code, stderr)
		}
	})
	if n := d.calls.Load(); n != 1 {
		t.Fatalf("the handler ran %d times; want once, for the one authorized request", n)
	}

	t.Run("the reader gets the table, through KUBECONFIG, verified, no flags", func(t *testing.T) {
		t.Setenv("KUBECONFIG", reader)
		code, stdout, stderr := plugin("shop/db-0")
		if code != 0 {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		var want bytes.Buffer
		if err := printTable(&want, samplePod()); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want.String(), stdout); diff != "" {
			t.Errorf("table (-want +got):\n%s", diff)
		}
	})
	t.Run("the reader gets JSON, bare pod name with -n", func(t *testing.T) {
		code, stdout, stderr := plugin("db-0", "-n", "shop", "--kubeconfig", reader, "-o", "json")
		if code != 0 {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		var got inspect.Pod
		if err := json.Unmarshal([]byte(stdout), &got); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(samplePod(), &got); diff != "" {
			t.Errorf("JSON (-want +got):\n%s", diff)
		}
	})
	t.Run("the reader, a namespace it may not read: the agent's 403", func(t *testing.T) {
		code, _, stderr := plugin("vault/db-0", "--kubeconfig", reader, "--agent-url", agentURL)
		if code != 1 || !strings.Contains(stderr, "refused (403): forbidden: user system:serviceaccount:users:reader may not get pods in namespace vault") {
			t.Errorf("exit %d, stderr %q; want 1 with the agent's 403 for the namespace", code, stderr)
		}
	})
	t.Run("a pod the agent does not know: 404 from the agent", func(t *testing.T) {
		code, _, stderr := plugin("shop/gone", "--kubeconfig", reader, "--agent-url", agentURL)
		if code != 1 || !strings.Contains(stderr, "answered 404: pod shop/gone is not known on node node-a") {
			t.Errorf("exit %d, stderr %q; want 1 with the agent's 404", code, stderr)
		}
	})
	t.Run("a user who is no service account: refused unless naming one", func(t *testing.T) {
		admin := adminKubeconfig(t, cfg)
		before := d.calls.Load()
		code, _, stderr := plugin("shop/db-0", "--kubeconfig", admin)
		if code != 1 || !strings.Contains(stderr, "not a service account: pass --token-service-account") {
			t.Errorf("exit %d, stderr %q; want the way for non-service-account users", code, stderr)
		}
		if d.calls.Load() != before {
			t.Error("the agent was asked without a token for its audience")
		}
		code, stdout, stderr := plugin("shop/db-0", "--kubeconfig", admin, "--token-service-account", "users/reader", "-o", "json")
		if code != 0 || !strings.Contains(stdout, `"namespace": "shop"`) {
			t.Errorf("exit %d, stderr %q; want the reader's view through its minted token", code, stderr)
		}
	})
	t.Run("the self-signed certificate of an agent without one is refused", func(t *testing.T) {
		// The same CA ConfigMap, but an agent that serves its own self-signed certificate.
		auth := agentAuth(t, cfg)
		srv, err := serving.NewServer(serving.Options{BindAddress: "127.0.0.1:0", Auth: auth, Limits: serving.DefaultLimits(), Log: testr.New(t),
			Routes: serving.AgentRoutes(http.NotFoundHandler(), inspect.PathPrefix, inspect.NewHandler(d, auth), false)})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- srv.Start(ctx) }()
		defer func() {
			cancel()
			if err := <-done; err != nil {
				t.Logf("the impostor server stopped: %v", err)
			}
		}()
		eventually(t, "the impostor listens", func() error {
			if srv.Addr() == "" {
				return fmt.Errorf("no address yet")
			}
			return nil
		})
		before := d.calls.Load()
		code, _, stderr := plugin("shop/db-0", "--kubeconfig", reader, "--agent-url", "https://"+srv.Addr())
		if code != 1 || !strings.Contains(stderr, "certificate") || !strings.Contains(stderr, "does not verify with the CA of ConfigMap numapref-system/numapref-agent-ca") {
			t.Errorf("exit %d, stderr %q; want 1 with a certificate error", code, stderr)
		}
		if d.calls.Load() != before {
			t.Error("the request reached a server with an unverified certificate")
		}
	})
}

// agentAuth is the agent's Auth on the test's API server: the token policy and the
// issuer's keys learnt from it, as the agent learns them. Every user of this test comes
// from 127.0.0.1: the per-client review limit, tested in internal/serving, would make
// them wait for each other.
func agentAuth(t *testing.T, cfg *rest.Config) *serving.Auth {
	t.Helper()
	rcs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	policy, _ := serving.LearnTokenPolicy(context.Background(), cfg, rcs.Discovery().RESTClient())
	auth, err := serving.NewAuth(serving.AuthOptions{Tokens: rcs.AuthenticationV1().TokenReviews(), Access: rcs.AuthorizationV1().SubjectAccessReviews(),
		Policy: policy, ReviewRate: serving.ReviewRate{PerSecond: 1000, Burst: 1000}})
	if err != nil {
		t.Fatal(err)
	}
	return auth
}

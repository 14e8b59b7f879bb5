//go:build integration

package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/yaml"

	"github.com/numapref/numapref/internal/inspect"
)

// cannedDescriber answers for shop/db-0 only; it counts the requests that got through.
type cannedDescriber struct{ calls atomic.Int32 }

func (d *cannedDescriber) Describe(_ context.Context, namespace, name string) (*inspect.Pod, error) {
	d.calls.Add(1)
	if namespace != "shop" || name != "db-0" {
		return nil, fmt.Errorf("pod %s/%s is not known on node node-a: %w", namespace, name, inspect.ErrNotFound)
	}
	return samplePod(), nil
}

// startAgentMetricsServer runs controller-runtime's metrics server as the agent configures
// it (HTTPS, the authentication and authorization filter against the API server at cfg)
// with the inspect handler as an extra handler, and returns its port.
func startAgentMetricsServer(t *testing.T, cfg *rest.Config, d inspect.Describer) int {
	t.Helper()
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := metricsserver.NewServer(metricsserver.Options{
		BindAddress: "127.0.0.1:0", SecureServing: true, CertDir: t.TempDir(),
		FilterProvider: filters.WithAuthenticationAndAuthorization,
		ExtraHandlers:  map[string]http.Handler{inspect.PathPrefix: inspect.NewHandler(d)},
	}, cfg, hc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("metrics server: %v", err)
		}
	})
	addr := ""
	eventually(t, "the metrics server listens", func() error {
		addr = srv.(interface{ GetBindAddr() string }).GetBindAddr()
		if addr == "" {
			return fmt.Errorf("no address yet")
		}
		return nil
	})
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	port, err := strconv.Atoi(p)
	if err != nil {
		t.Fatal(err)
	}
	return port
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

// TestInspectThroughTheAgentsAuth runs the plugin against the agent's real metrics server
// with the real TokenReview/SubjectAccessReview filter and the shipped ClusterRole, all
// against a real API server: the plugin discovers the agent, sends the user's token, and
// the agent lets through only users bound to the inspect-reader role.
func TestInspectThroughTheAgentsAuth(t *testing.T) {
	cfg, cs := apiServer(t)
	d := &cannedDescriber{}
	port := startAgentMetricsServer(t, cfg, d)
	const node = "auth-node"
	createPod(t, cs, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "db-0"}, Spec: corev1.PodSpec{NodeName: node}})
	createPod(t, cs, agentPod("agent-auth", node, int32(port), runningAgent("127.0.0.1")))

	// Both users may find pods; only the reader may inspect.
	readerToken := serviceAccountToken(t, cs, "users", "reader")
	strangerToken := serviceAccountToken(t, cs, "users", "stranger")
	bindClusterRole(t, cs, podReader, "users", "reader")
	bindClusterRole(t, cs, podReader, "users", "stranger")
	bindClusterRole(t, cs, inspectReaderRole(t), "users", "reader")
	reader, stranger := writeKubeconfig(t, cfg, readerToken), writeKubeconfig(t, cfg, strangerToken)
	agentURL := fmt.Sprintf("https://127.0.0.1:%d", port)

	plugin := func(args ...string) (int, string, string) {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), append([]string{"inspect"}, args...), &stdout, &stderr)
		return code, stdout.String(), stderr.String()
	}

	t.Run("no token: 401", func(t *testing.T) {
		c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
		resp, err := c.Get(agentURL + inspect.Path("shop", "db-0"))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("status %d, want 401", resp.StatusCode)
		}
	})
	t.Run("a user without the role: 403", func(t *testing.T) {
		code, _, stderr := plugin("shop/db-0", "--kubeconfig", stranger, "--insecure-skip-tls-verify")
		if code != 1 || !strings.Contains(stderr, "refused (403 Authorization denied for user system:serviceaccount:users:stranger)") ||
			!strings.Contains(stderr, "inspect-reader") {
			t.Errorf("exit %d, stderr %q; want 1 with the 403 and the role to bind", code, stderr)
		}
	})
	// controller-runtime's filter answers an invalid token with 500: the TokenReview
	// reports an error for it, which the filter does not tell from an outage.
	t.Run("an invalid token: 500 Authentication failed", func(t *testing.T) {
		code, _, stderr := plugin("shop/db-0", "--kubeconfig", writeKubeconfig(t, cfg, "not-a-token"), "--insecure-skip-tls-verify", "--agent-url", agentURL)
		if code != 1 || !strings.Contains(stderr, "could not authenticate your token (500 Authentication failed)") {
			t.Errorf("exit %d, stderr %q; want 1 with the failed TokenReview explained", code, stderr)
		}
	})
	if n := d.calls.Load(); n != 0 {
		t.Fatalf("the handler ran %d times for unauthorized requests", n)
	}

	t.Run("the self-signed certificate is not trusted by default", func(t *testing.T) {
		code, _, stderr := plugin("shop/db-0", "--kubeconfig", reader)
		if code != 1 || !strings.Contains(stderr, "certificate") || !strings.Contains(stderr, "--agent-ca-file") {
			t.Errorf("exit %d, stderr %q; want 1 with a certificate error and the way out", code, stderr)
		}
	})
	t.Run("the reader gets the table, through KUBECONFIG", func(t *testing.T) {
		t.Setenv("KUBECONFIG", reader)
		code, stdout, stderr := plugin("shop/db-0", "--insecure-skip-tls-verify")
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
		code, stdout, stderr := plugin("db-0", "-n", "shop", "--kubeconfig", reader, "--insecure-skip-tls-verify", "-o", "json")
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
	t.Run("a pod the agent does not know: 404 from the agent", func(t *testing.T) {
		code, _, stderr := plugin("shop/gone", "--kubeconfig", reader, "--insecure-skip-tls-verify", "--agent-url", agentURL)
		if code != 1 || !strings.Contains(stderr, "answered 404: pod shop/gone is not known on node node-a") {
			t.Errorf("exit %d, stderr %q; want 1 with the agent's 404", code, stderr)
		}
	})
}

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"k8s.io/client-go/rest"
)

// TestAgentCAFile checks the verified path: an agent certificate signed by a CA the user
// gives, and the token sent as a bearer token, to an httptest TLS server standing in for
// the agent.
func TestAgentCAFile(t *testing.T) {
	var gotAuth, gotPath atomic.Value
	ts := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotAuth.Store(r.Header.Get("Authorization"))
		gotPath.Store(r.URL.Path)
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(samplePod())
	}))
	defer ts.Close()
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ts.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	// The API server is never asked: --agent-url skips discovery.
	kc := writeKubeconfig(t, &rest.Config{Host: "https://127.0.0.1:1"}, "s3cr3t")
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"inspect", "shop/db-0", "--kubeconfig", kc, "--agent-url", ts.URL, "--agent-ca-file", ca, "-o", "json"}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	if got := gotAuth.Load(); got != "Bearer s3cr3t" {
		t.Errorf("Authorization = %q, want the kubeconfig's bearer token", got)
	}
	if got := gotPath.Load(); got != "/inspect/shop/db-0" {
		t.Errorf("path = %q, want /inspect/shop/db-0", got)
	}

	// A certificate for another name fails unless the name is given.
	code = run(context.Background(), []string{"inspect", "shop/db-0", "--kubeconfig", kc, "--agent-url", ts.URL, "--agent-ca-file", ca,
		"--tls-server-name", "agent.invalid"}, &stdout, &stderr)
	if code != 1 || !strings.Contains(stderr.String(), "agent.invalid") {
		t.Errorf("exit %d, stderr %q; want a name mismatch", code, stderr.String())
	}

	// A kubeconfig user with client certificates only has nothing the agent accepts.
	certUser := writeKubeconfig(t, &rest.Config{Host: "https://127.0.0.1:1"}, "")
	stderr.Reset()
	code = run(context.Background(), []string{"inspect", "shop/db-0", "--kubeconfig", certUser, "--agent-url", ts.URL, "--agent-ca-file", ca}, &stdout, &stderr)
	if code != 1 || !strings.Contains(stderr.String(), "no bearer token") {
		t.Errorf("exit %d, stderr %q; want the missing token explained", code, stderr.String())
	}
}

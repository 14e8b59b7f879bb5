// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/client-go/rest"

	"github.com/numapref/numapref/internal/inspect"
	"github.com/numapref/numapref/internal/testutil/testcerts"
)

// fakeJWT is an unsigned JWT with the aud claim aud: the plugin reads the claim, the
// agent's TokenReview (not here) checks the rest.
func fakeJWT(t *testing.T, aud any) string {
	t.Helper()
	claims, err := json.Marshal(map[string]any{"aud": aud, "sub": "system:serviceaccount:users:reader"})
	if err != nil {
		t.Fatal(err)
	}
	enc := base64.RawURLEncoding.EncodeToString
	return enc([]byte(`{"alg":"RS256"}`)) + "." + enc(claims) + ".c2ln"
}

// fakeAgent is an httptest TLS server standing in for the agent, with a certificate for
// name signed by a CA it returns, written to a file.
func fakeAgent(t *testing.T, name string) (url, caFile string, auth *atomic.Value, calls *atomic.Int32) {
	t.Helper()
	auth, calls = &atomic.Value{}, &atomic.Int32{}
	ts := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		auth.Store(r.Header.Get("Authorization"))
		if r.URL.Path != "/inspect/shop/db-0" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(samplePod())
	}))
	ca := testcerts.NewCA(t, "agent-ca")
	ts.TLS = &tls.Config{Certificates: []tls.Certificate{ca.Issue(t, []string{name}, []net.IP{net.IPv4(127, 0, 0, 1)}).TLS(t)}}
	ts.StartTLS()
	t.Cleanup(ts.Close)
	caFile = filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, ca.PEM, 0o600); err != nil {
		t.Fatal(err)
	}
	return ts.URL, caFile, auth, calls
}

// TestAgentCAFile checks the verified path with a CA the user gives, and which token is
// sent: a kubeconfig token bound to the agent's audience goes as it is; any other is
// never sent (here the API server, which would mint one, is unreachable).
func TestAgentCAFile(t *testing.T) {
	url, ca, gotAuth, calls := fakeAgent(t, "agent.example")
	// The API server is never asked: --agent-url skips discovery, --agent-ca-file the
	// ConfigMap, and the token is the kubeconfig's.
	agentToken := fakeJWT(t, []string{"other", inspect.Audience})
	kc := writeKubeconfig(t, &rest.Config{Host: "https://127.0.0.1:1"}, agentToken)
	run := func(args ...string) (int, string) {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), append([]string{"inspect", "shop/db-0", "--agent-url", url, "--agent-ca-file", ca}, args...), &stdout, &stderr)
		return code, stderr.String()
	}
	if code, stderr := run("--kubeconfig", kc, "-o", "json"); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if got := gotAuth.Load(); got != "Bearer "+agentToken {
		t.Errorf("Authorization = %q, want the kubeconfig's token for the agent's audience", got)
	}

	// The certificate is for agent.example and 127.0.0.1: another name fails.
	if code, stderr := run("--kubeconfig", kc, "--tls-server-name", "agent.invalid"); code != 1 || !strings.Contains(stderr, "agent.invalid") {
		t.Errorf("exit %d, stderr %q; want a name mismatch", code, stderr)
	}
	if code, stderr := run("--kubeconfig", kc, "--tls-server-name", "agent.example"); code != 0 {
		t.Errorf("exit %d, stderr %q; want the name the certificate carries to verify", code, stderr)
	}

	// Tokens the agent would refuse are not sent: one for the API server, an opaque one,
	// none at all. Here the plugin would ask the API server for one and cannot.
	before := calls.Load()
	for name, token := range map[string]string{
		"API server token": fakeJWT(t, "https://kubernetes.default.svc"),
		"opaque token":     "s3cr3t",
		"no token":         "",
	} {
		code, stderr := run("--kubeconfig", writeKubeconfig(t, &rest.Config{Host: "https://127.0.0.1:1"}, token))
		if code != 1 || !strings.Contains(stderr, "asking the API server who you are") {
			t.Errorf("%s: exit %d, stderr %q; want the failed SelfSubjectReview", name, code, stderr)
		}
	}
	if n := calls.Load() - before; n != 0 {
		t.Errorf("the agent was called %d times with tokens it does not accept", n)
	}
}

func TestJWTAudiences(t *testing.T) {
	tests := map[string]struct {
		token string
		want  []string
	}{
		"one audience":  {fakeJWT(t, "numapref-agent"), []string{"numapref-agent"}},
		"a list":        {fakeJWT(t, []string{"a", "b"}), []string{"a", "b"}},
		"no aud claim":  {fakeJWT(t, nil), nil},
		"opaque":        {"s3cr3t", nil},
		"bad base64":    {"a.%%%.c", nil},
		"not JSON":      {"a." + base64.RawURLEncoding.EncodeToString([]byte("nope")) + ".c", nil},
		"aud as number": {fakeJWT(t, 7), nil},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, jwtAudiences(tc.token)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

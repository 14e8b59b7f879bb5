// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"

	"github.com/numapref/numapref/internal/inspect"
	"github.com/numapref/numapref/internal/testutil/testcerts"
)

// With per-node certificates (the ConfigMap's verify: node), the plugin accepts an agent
// only if its certificate names the address dialled and the node of the pod asked about:
// node A's certificate is refused when the plugin wants node B's agent, whether A's
// certificate carries the address dialled or not.
func TestPerNodeCertificateNamesTheNodeDialled(t *testing.T) {
	ca := testcerts.NewCA(t, "agent-ca")
	loopback := []net.IP{net.IPv4(127, 0, 0, 1)}
	cs := fake.NewClientset(&corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: "numapref-system", Name: inspect.CAConfigMap},
		Data:       map[string]string{inspect.CAConfigMapCAKey: string(ca.PEM), inspect.CAConfigMapVerifyKey: inspect.VerifyNode},
	})
	for _, tc := range []struct {
		name       string
		ca         *testcerts.CA // nil: the published CA
		certNode   string
		certIPs    []net.IP
		wantNode   string
		wantRefuse string // empty: accepted
	}{
		{name: "its own node", certNode: "node-a", certIPs: loopback, wantNode: "node-a"},
		{name: "node A's certificate for node B's agent", certNode: "node-a", certIPs: loopback, wantNode: "node-b", wantRefuse: "not its node's"},
		// The name proves the agent, not the address: an agent bound to loopback verifies.
		{name: "node B's certificate at another address", certNode: "node-b", certIPs: []net.IP{net.IPv4(10, 0, 0, 2)}, wantNode: "node-b"},
		{name: "node B's name from another CA", ca: testcerts.NewCA(t, "other-ca"), certNode: "node-b", certIPs: loopback, wantNode: "node-b", wantRefuse: "not signed by the CA"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }))
			issuer := ca
			if tc.ca != nil {
				issuer = tc.ca
			}
			ts.TLS = &tls.Config{Certificates: []tls.Certificate{issuer.Issue(t, []string{tc.certNode}, tc.certIPs).TLS(t)}}
			ts.StartTLS()
			defer ts.Close()
			o := inspectOptions{agentNamespace: "numapref-system", node: tc.wantNode}
			trust, err := resolveTrust(context.Background(), cs, &o)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := agentClient(&rest.Config{}, trust, 10*time.Second).Get(ts.URL)
			if resp != nil {
				resp.Body.Close()
			}
			switch {
			case tc.wantRefuse == "" && err != nil:
				t.Fatalf("refused its own node's agent: %v", err)
			case tc.wantRefuse != "" && (err == nil || !strings.Contains(err.Error(), tc.wantRefuse)):
				t.Fatalf("err = %v, want a refusal mentioning %q", err, tc.wantRefuse)
			}
		})
	}
	// Without the node, per-node verification cannot be done: a refusal, not a weaker check.
	trust, err := resolveTrust(context.Background(), cs, &inspectOptions{agentNamespace: "numapref-system"})
	if err != nil || !trust.perNode {
		t.Fatalf("resolveTrust = %+v, %v; want per-node verification", trust, err)
	}
	if err := trust.verifyNode(tls.ConnectionState{}); err == nil {
		t.Error("verifyNode without the node accepted the agent")
	}
}

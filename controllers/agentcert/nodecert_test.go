// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package agentcert

import (
	"crypto"
	"crypto/tls"
	"net"
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/numapref/numapref/internal/testutil/testcerts"
)

// What the signer issued is served only if it is for this agent's key, names this node and
// is valid now.
func TestKeyPairChecksWhatWasIssued(t *testing.T) {
	ca := testcerts.NewCA(t, "signer")
	ips := []net.IP{net.IPv4(10, 0, 0, 1)}
	issued := ca.Issue(t, []string{"node-a"}, ips)
	key := issued.TLS(t).PrivateKey.(crypto.Signer)
	other := ca.Issue(t, []string{"node-a"}, ips).TLS(t).PrivateKey.(crypto.Signer)
	now := time.Now()
	for _, tc := range []struct {
		name    string
		pem     []byte
		key     crypto.Signer
		node    string
		now     time.Time
		wantErr string
	}{
		{name: "its own", pem: issued.Cert, key: key, node: "node-a", now: now},
		{name: "another key's", pem: issued.Cert, key: other, node: "node-a", now: now, wantErr: "not for this agent's key"},
		{name: "another node's", pem: issued.Cert, key: key, node: "node-b", now: now, wantErr: "does not name node node-b"},
		{name: "expired", pem: issued.Cert, key: key, node: "node-a", now: now.Add(48 * time.Hour), wantErr: "not now"},
		{name: "no certificate", pem: []byte("junk"), key: key, node: "node-a", now: now, wantErr: "no PEM CERTIFICATE"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pair, err := keyPair(tc.pem, tc.key, tc.node, tc.now)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				if _, err := tls.X509KeyPair(issued.Cert, issued.Key); err != nil || pair.Leaf == nil || len(pair.Certificate) != 1 {
					t.Fatalf("pair %+v, %v", pair, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("err = %v, want %q", err, tc.wantErr)
			}
		})
	}
}

// The agent is not ready while its node's certificate is not issued, or once the one it
// serves has expired: the pod's readiness says why its TLS port serves nothing.
func TestNodeCertificateReadiness(t *testing.T) {
	ca := testcerts.NewCA(t, "signer")
	issued := ca.Issue(t, []string{"node-a"}, []net.IP{net.IPv4(10, 0, 0, 1)})
	key := issued.TLS(t).PrivateKey.(crypto.Signer)
	clk := clocktesting.NewFakeClock(time.Now())
	c := &NodeCertificate{Node: "node-a", Clock: clk}
	if err := c.Ready(nil); err == nil || !strings.Contains(err.Error(), "not issued yet") {
		t.Fatalf("Ready before any certificate = %v, want not issued", err)
	}
	pair, err := keyPair(issued.Cert, key, "node-a", clk.Now())
	if err != nil {
		t.Fatal(err)
	}
	c.mu.Lock()
	c.cert = pair
	c.mu.Unlock()
	if err := c.Ready(nil); err != nil {
		t.Fatalf("Ready with a valid certificate = %v", err)
	}
	clk.SetTime(pair.Leaf.NotAfter)
	if err := c.Ready(nil); err == nil || !strings.Contains(err.Error(), "expired") {
		t.Fatalf("Ready past the certificate's NotAfter = %v, want expired", err)
	}
}

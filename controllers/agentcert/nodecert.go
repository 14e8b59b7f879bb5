// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package agentcert

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/go-logr/logr"
	certificatesv1 "k8s.io/api/certificates/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	certificatesv1client "k8s.io/client-go/kubernetes/typed/certificates/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"github.com/numapref/numapref/internal/inspect"
)

// NodeCertificate obtains this node's own serving certificate through the CSR API and
// renews it: a key made in memory (never written anywhere), a request naming the node
// (CommonName and DNS SAN) and its addresses (IP SANs: the Node's InternalIP addresses), signed by
// AgentServingSigner: the signer signs it only for the agent bound to that node
// (SetupAgentCertSigner). A client that dials a node's address and checks the certificate
// names that node can then tell one agent from another: root on one node cannot pose as
// another node's agent. It is a controller-runtime Runnable; GetCertificate serves the
// current certificate, and none before the first is issued.
type NodeCertificate struct {
	Client NodeCertificateClient
	Node   string
	// Lifetime is the validity asked for (the signer may give less); renewal starts at two
	// thirds of the validity given.
	Lifetime time.Duration
	Log      logr.Logger
	Clock    clock.WithTicker

	mu   sync.Mutex
	cert *tls.Certificate
}

// NodeCertificateClient is what NodeCertificate asks the API: the Node's addresses, and
// the CSRs. A kubernetes.Interface is one; the agent passes the two typed clients alone, so
// that its binary does not link every API group's client.
type NodeCertificateClient interface {
	CoreV1() corev1client.CoreV1Interface
	CertificatesV1() certificatesv1client.CertificatesV1Interface
}

// NeedLeaderElection implements manager.LeaderElectionRunnable: every agent has its own.
func (*NodeCertificate) NeedLeaderElection() bool { return false }

// GetCertificate is a tls.Config GetCertificate: the node's current certificate.
func (c *NodeCertificate) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cert == nil {
		return nil, errors.New("this node's serving certificate is not issued yet")
	}
	return c.cert, nil
}

// Ready is a healthz.Checker for the agent's readiness: an error until this node's
// certificate is issued, and once the one served has expired. Until then the TLS port
// serves nothing (no certificate a client could verify), and the pod's readiness says why;
// the agent's work on its node goes on.
func (c *NodeCertificate) Ready(*http.Request) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cert == nil {
		return errors.New("this node's serving certificate is not issued yet: is the signer of " + AgentServingSigner + " (the release's signer Deployment) running?")
	}
	if now := c.clock().Now(); !now.Before(c.cert.Leaf.NotAfter) {
		return fmt.Errorf("this node's serving certificate expired at %s and no new one is issued", c.cert.Leaf.NotAfter.UTC().Format(time.RFC3339))
	}
	return nil
}

// clock is Clock, else the real one.
func (c *NodeCertificate) clock() clock.WithTicker {
	if c.Clock == nil {
		return clock.RealClock{}
	}
	return c.Clock
}

// Start obtains a certificate, then a new one at two thirds of each one's validity, until
// ctx is done; a failed attempt is retried with backoff, the current certificate served
// meanwhile.
func (c *NodeCertificate) Start(ctx context.Context) error {
	backoff := time.Second
	for {
		wait := backoff
		cert, err := c.obtain(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			c.Log.Error(err, "Obtaining this node's serving certificate failed; retrying", "in", backoff)
			backoff = min(2*backoff, 5*time.Minute)
		} else {
			c.mu.Lock()
			c.cert = cert
			c.mu.Unlock()
			backoff = time.Second
			leaf := cert.Leaf
			wait = leaf.NotBefore.Add(leaf.NotAfter.Sub(leaf.NotBefore) * 2 / 3).Sub(c.clock().Now())
			c.Log.Info("Serving this node's own certificate", "notAfter", leaf.NotAfter, "renewIn", wait.Round(time.Second))
		}
		select {
		case <-ctx.Done():
			return nil
		case <-c.clock().After(max(wait, time.Second)):
		}
	}
}

// obtain asks for one certificate and waits until it is issued, denied or failed.
func (c *NodeCertificate) obtain(ctx context.Context) (*tls.Certificate, error) {
	node, err := c.Client.CoreV1().Nodes().Get(ctx, c.Node, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("getting Node %s for its addresses: %w", c.Node, err)
	}
	ips := inspect.NodeInternalIPs(node)
	if len(ips) == 0 {
		return nil, fmt.Errorf("node %s reports no InternalIP address", c.Node)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("making a key: %w", err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{
		Subject: pkix.Name{CommonName: c.Node}, DNSNames: []string{c.Node}, IPAddresses: ips,
	}, key)
	if err != nil {
		return nil, fmt.Errorf("making the certificate request: %w", err)
	}
	csr, err := c.Client.CertificatesV1().CertificateSigningRequests().Create(ctx, &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "numapref-agent-" + c.Node + "-"},
		Spec: certificatesv1.CertificateSigningRequestSpec{
			Request:           pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}),
			SignerName:        AgentServingSigner,
			Usages:            []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageServerAuth},
			ExpirationSeconds: ptr.To(int32(c.Lifetime / time.Second)),
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("creating a CertificateSigningRequest: %w", err)
	}
	c.Log.Info("Asked for this node's serving certificate", "csr", csr.Name, "ips", ips)
	issued, err := c.waitIssued(ctx, csr.Name)
	if err != nil {
		return nil, err
	}
	return keyPair(issued, key, c.Node, c.clock().Now())
}

// waitIssued polls CSR name until it carries a certificate, or says it never will.
func (c *NodeCertificate) waitIssued(ctx context.Context, name string) ([]byte, error) {
	interval := 500 * time.Millisecond
	for {
		csr, err := c.Client.CertificatesV1().CertificateSigningRequests().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("reading CertificateSigningRequest %s: %w", name, err)
		}
		for _, cond := range csr.Status.Conditions {
			if cond.Type == certificatesv1.CertificateDenied || cond.Type == certificatesv1.CertificateFailed {
				return nil, fmt.Errorf("CertificateSigningRequest %s %s: %s: %s", name, cond.Type, cond.Reason, cond.Message)
			}
		}
		if len(csr.Status.Certificate) > 0 {
			return csr.Status.Certificate, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-c.clock().After(interval):
			interval = min(2*interval, 10*time.Second)
		}
	}
}

// keyPair checks what the signer issued (a certificate for key, naming node, valid now)
// and makes the pair to serve, the chain as issued.
func keyPair(issued []byte, key crypto.Signer, node string, now time.Time) (*tls.Certificate, error) {
	var chain [][]byte
	for rest := issued; ; {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			break
		}
		if b.Type == "CERTIFICATE" {
			chain = append(chain, b.Bytes)
		}
	}
	if len(chain) == 0 {
		return nil, errors.New("the issued certificate holds no PEM CERTIFICATE")
	}
	leaf, err := x509.ParseCertificate(chain[0])
	if err != nil {
		return nil, fmt.Errorf("parsing the issued certificate: %w", err)
	}
	if pub, ok := leaf.PublicKey.(interface{ Equal(crypto.PublicKey) bool }); !ok || !pub.Equal(key.Public()) {
		return nil, errors.New("the issued certificate is not for this agent's key")
	}
	if err := leaf.VerifyHostname(node); err != nil {
		return nil, fmt.Errorf("the issued certificate does not name node %s: %w", node, err)
	}
	if now.Before(leaf.NotBefore) || !now.Before(leaf.NotAfter) {
		return nil, fmt.Errorf("the issued certificate is valid from %s to %s, not now", leaf.NotBefore, leaf.NotAfter)
	}
	return &tls.Certificate{Certificate: chain, PrivateKey: key, Leaf: leaf}, nil
}

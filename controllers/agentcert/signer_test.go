// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package agentcert

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// testAgentRequester is the agents' ServiceAccount as the signer's tests name it.
const testAgentRequester = "system:serviceaccount:numapref-system:numapref-agent"

// fataler is what the signer's test helpers need of a test: a testing.TB or GinkgoT().
type fataler interface {
	Helper()
	Fatal(args ...any)
}

func ecKey(t fataler) crypto.Signer {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

func rsaKey(t fataler, bits int) crypto.Signer {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, bits)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

// servingRequest is a PEM certificate request of key for cn, with IP addresses ips and the
// other names of names (DNS names, URIs, emails).
func servingRequest(t fataler, key crypto.Signer, cn string, ips []string, names x509.CertificateRequest) []byte {
	t.Helper()
	names.Subject = pkix.Name{CommonName: cn}
	for _, ip := range ips {
		names.IPAddresses = append(names.IPAddresses, net.ParseIP(ip))
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &names, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
}

// agentCSR is a CSR of AgentServingSigner for request, as the agent of node asks for it;
// mods change it.
func agentCSR(name, node string, request []byte, mods ...func(*certificatesv1.CertificateSigningRequest)) *certificatesv1.CertificateSigningRequest {
	csr := &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: certificatesv1.CertificateSigningRequestSpec{
			SignerName: AgentServingSigner, Request: request, Username: testAgentRequester,
			Usages: []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageServerAuth},
			Extra:  map[string]certificatesv1.ExtraValue{nodeNameExtra: {node}},
		},
	}
	for _, m := range mods {
		m(csr)
	}
	return csr
}

// testNodeWithIPs is a Node with an InternalIP for each of ips.
func testNodeWithIPs(name string, ips ...string) *corev1.Node {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	for _, ip := range ips {
		node.Status.Addresses = append(node.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: ip})
	}
	node.Status.Addresses = append(node.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeHostName, Address: name})
	return node
}

func TestDecideAgentCSR(t *testing.T) {
	key := ecKey(t)
	nodeA := testNodeWithIPs("a", "10.0.0.1", "fd00::1")
	nodeA.Status.Addresses = append(nodeA.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeExternalIP, Address: "192.0.2.1"})
	req := func(cn string, ips []string, names x509.CertificateRequest) []byte {
		return servingRequest(t, key, cn, ips, names)
	}
	// Node b also reports fd00::1 (root on a wrote it into a's status, or the other way).
	nodeB := testNodeWithIPs("b", "10.0.0.2", "fd00::1")
	valid := req("a", []string{"10.0.0.1"}, x509.CertificateRequest{})
	tampered := valid
	if block, _ := pem.Decode(valid); block != nil {
		der := append([]byte(nil), block.Bytes...)
		der[len(der)-3] ^= 0xff // inside the signature
		tampered = pem.EncodeToMemory(&pem.Block{Type: block.Type, Bytes: der})
	}
	cases := map[string]struct {
		csr  *certificatesv1.CertificateSigningRequest
		node *corev1.Node
		book addressBook // default: nodeA's and nodeB's
		want string
	}{
		"valid": {csr: agentCSR("c", "a", valid), node: nodeA, want: CSRReasonAgentNode},
		"an ExternalIP": {node: nodeA, want: CSRReasonSANsNotNodes,
			csr: agentCSR("c", "a", req("a", []string{"10.0.0.1", "192.0.2.1"}, x509.CertificateRequest{}))},
		"an InternalIP another Node reports too": {node: nodeA, want: CSRReasonSANsNotNodes,
			csr: agentCSR("c", "a", req("a", []string{"fd00::1"}, x509.CertificateRequest{}))},
		"valid, every InternalIP, the DNS name, all serving usages": {node: nodeA, want: CSRReasonAgentNode, book: addressBookOf(*nodeA),
			csr: agentCSR("c", "a", req("a", []string{"10.0.0.1", "fd00::1"}, x509.CertificateRequest{DNSNames: []string{"a"}}),
				func(c *certificatesv1.CertificateSigningRequest) {
					c.Spec.Usages = append(c.Spec.Usages, certificatesv1.UsageKeyEncipherment)
				})},
		"RSA 2048": {csr: agentCSR("c", "a", servingRequest(t, rsaKey(t, 2048), "a", []string{"10.0.0.1"}, x509.CertificateRequest{})),
			node: nodeA, want: CSRReasonAgentNode},
		"wrong requester": {node: nodeA, want: CSRReasonWrongRequester,
			csr: agentCSR("c", "a", valid, func(c *certificatesv1.CertificateSigningRequest) {
				c.Spec.Username = "system:serviceaccount:numapref-system:other"
			})},
		"no node-name extra": {node: nodeA, want: CSRReasonNoNodeName,
			csr: agentCSR("c", "a", valid, func(c *certificatesv1.CertificateSigningRequest) { c.Spec.Extra = nil })},
		"two node names": {node: nodeA, want: CSRReasonNoNodeName,
			csr: agentCSR("c", "a", valid, func(c *certificatesv1.CertificateSigningRequest) {
				c.Spec.Extra[nodeNameExtra] = certificatesv1.ExtraValue{"a", "b"}
			})},
		"unknown node":         {csr: agentCSR("c", "a", valid), node: nil, want: CSRReasonUnknownNode},
		"another node's Node":  {csr: agentCSR("c", "a", valid), node: testNodeWithIPs("b", "10.0.0.1"), want: CSRReasonUnknownNode},
		"common name mismatch": {csr: agentCSR("c", "a", req("b", []string{"10.0.0.1"}, x509.CertificateRequest{})), node: nodeA, want: CSRReasonSANsNotNodes},
		"IP of another node":   {csr: agentCSR("c", "a", req("a", []string{"10.0.0.1", "10.0.0.2"}, x509.CertificateRequest{})), node: nodeA, want: CSRReasonSANsNotNodes},
		"no IP":                {csr: agentCSR("c", "a", req("a", nil, x509.CertificateRequest{DNSNames: []string{"a"}})), node: nodeA, want: CSRReasonSANsNotNodes},
		"DNS name not the node": {node: nodeA, want: CSRReasonSANsNotNodes,
			csr: agentCSR("c", "a", req("a", []string{"10.0.0.1"}, x509.CertificateRequest{DNSNames: []string{"a", "kubernetes.default"}}))},
		"URI": {node: nodeA, want: CSRReasonSANsNotNodes,
			csr: agentCSR("c", "a", req("a", []string{"10.0.0.1"}, x509.CertificateRequest{URIs: []*url.URL{{Scheme: "spiffe", Host: "a"}}}))},
		"email": {node: nodeA, want: CSRReasonSANsNotNodes,
			csr: agentCSR("c", "a", req("a", []string{"10.0.0.1"}, x509.CertificateRequest{EmailAddresses: []string{"a@example.com"}}))},
		"client auth": {node: nodeA, want: CSRReasonBadUsages,
			csr: agentCSR("c", "a", valid, func(c *certificatesv1.CertificateSigningRequest) {
				c.Spec.Usages = append(c.Spec.Usages, certificatesv1.UsageClientAuth)
			})},
		"no server auth": {node: nodeA, want: CSRReasonBadUsages,
			csr: agentCSR("c", "a", valid, func(c *certificatesv1.CertificateSigningRequest) {
				c.Spec.Usages = []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature}
			})},
		"RSA 1024": {node: nodeA, want: CSRReasonBadRequest,
			csr: agentCSR("c", "a", servingRequest(t, rsaKey(t, 1024), "a", []string{"10.0.0.1"}, x509.CertificateRequest{}))},
		"ed25519": {node: nodeA, want: CSRReasonBadRequest,
			csr: agentCSR("c", "a", servingRequest(t, ed25519Key(t), "a", []string{"10.0.0.1"}, x509.CertificateRequest{}))},
		"bad signature": {csr: agentCSR("c", "a", tampered), node: nodeA, want: CSRReasonBadRequest},
		"not PEM":       {csr: agentCSR("c", "a", []byte("junk")), node: nodeA, want: CSRReasonBadRequest},
		"a certificate, not a request": {node: nodeA, want: CSRReasonBadRequest,
			csr: agentCSR("c", "a", []byte(strings.Replace(string(valid), "CERTIFICATE REQUEST", "CERTIFICATE", 2)))},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			book := tc.book
			if book == nil {
				book = addressBookOf(*nodeA, *nodeB)
			}
			d := decideCSR(tc.csr, tc.node, testAgentRequester, book)
			if diff := cmp.Diff(tc.want, d.reason); diff != "" {
				t.Fatalf("reason (-want +got):\n%s\nmessage: %s", diff, d.message)
			}
			if d.message == "" || d.approved() != (d.request != nil) {
				t.Fatalf("decision %+v: a message, and a request exactly when approved", d)
			}
			t.Logf("%s: %s", d.reason, d.message)
		})
	}
}

func ed25519Key(t fataler) crypto.Signer {
	t.Helper()
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

// testSignerCA makes a CA as helm's genCA does (RSA 2048, PKCS#1 key) valid until
// notAfter, in PEM.
func testSignerCA(t fataler, notAfter time.Time, isCA bool) (certPEM, keyPEM []byte) {
	t.Helper()
	key := rsaKey(t, 2048).(*rsa.PrivateKey)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "numapref-agent-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: notAfter,
		IsCA: isCA, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
}

func TestIssueAgentCertificate(t *testing.T) {
	now := time.Now().Truncate(time.Second)
	certPEM, keyPEM := testSignerCA(t, now.Add(365*24*time.Hour), true)
	ca, err := parseSignerCA(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	csr := agentCSR("c", "a", servingRequest(t, ecKey(t), "a", []string{"10.0.0.1", "fd00::1"}, x509.CertificateRequest{DNSNames: []string{"a"}}))
	node := testNodeWithIPs("a", "10.0.0.1", "fd00::1")
	d := decideCSR(csr, node, testAgentRequester, addressBookOf(*node))
	if !d.approved() {
		t.Fatalf("the test's CSR is refused: %s", d.message)
	}
	cert := parseIssued(t, ca, d.request, now, time.Hour)

	roots := x509.NewCertPool()
	roots.AddCert(ca.cert)
	opts := x509.VerifyOptions{Roots: roots, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	if _, err := cert.Verify(opts); err != nil {
		t.Fatalf("the issued certificate does not chain to the CA: %v", err)
	}
	var ips []string
	for _, ip := range cert.IPAddresses {
		ips = append(ips, ip.String())
	}
	got := struct {
		CN       string
		DNS, IPs []string
		URIs     int
		EKU      []x509.ExtKeyUsage
		Usage    x509.KeyUsage
		IsCA     bool
	}{cert.Subject.CommonName, cert.DNSNames, ips, len(cert.URIs), cert.ExtKeyUsage, cert.KeyUsage, cert.IsCA}
	want := got
	want.CN, want.DNS, want.IPs, want.URIs = "a", []string{"a"}, []string{"10.0.0.1", "fd00::1"}, 0
	want.EKU, want.Usage, want.IsCA = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, x509.KeyUsageDigitalSignature, false
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("issued certificate (-want +got):\n%s", diff)
	}
	if cert.SerialNumber.BitLen() < 64 {
		t.Errorf("serial %v: not a random 128-bit number", cert.SerialNumber)
	}
}

// parseIssued issues a certificate for req at now for ttl and parses it.
func parseIssued(t *testing.T, ca *signerCA, req *x509.CertificateRequest, now time.Time, ttl time.Duration) *x509.Certificate {
	t.Helper()
	data, err := ca.issue(req, now, ttl)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(data)
	if block == nil || block.Type != "CERTIFICATE" {
		t.Fatalf("issued %q: not a PEM certificate", data)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

func TestAgentCertificateLifetime(t *testing.T) {
	now := time.Now().Truncate(time.Second)
	const maxTTL = 30 * 24 * time.Hour
	caEnd := now.Add(60 * 24 * time.Hour)
	certPEM, keyPEM := testSignerCA(t, caEnd, true)
	ca, err := parseSignerCA(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	req, err := parseServingRequest(servingRequest(t, ecKey(t), "a", []string{"10.0.0.1"}, x509.CertificateRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		expirationSeconds *int32
		maxTTL            time.Duration
		want              time.Time
	}{
		"no expirationSeconds: MaxTTL":       {maxTTL: maxTTL, want: now.Add(maxTTL)},
		"expirationSeconds shorter":          {expirationSeconds: ptr.To[int32](3600), maxTTL: maxTTL, want: now.Add(time.Hour)},
		"expirationSeconds past MaxTTL":      {expirationSeconds: ptr.To[int32](90 * 24 * 3600), maxTTL: maxTTL, want: now.Add(maxTTL)},
		"MaxTTL past the CA's end: the CA's": {maxTTL: 365 * 24 * time.Hour, want: caEnd},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			cert := parseIssued(t, ca, req, now, certLifetime(tc.expirationSeconds, tc.maxTTL))
			if !cert.NotAfter.Equal(tc.want) {
				t.Errorf("NotAfter %s, want %s", cert.NotAfter, tc.want)
			}
			if want := now.Add(-5 * time.Minute); !cert.NotBefore.Equal(want) {
				t.Errorf("NotBefore %s, want %s", cert.NotBefore, want)
			}
		})
	}
	if _, err := ca.issue(req, caEnd.Add(time.Minute), maxTTL); err == nil {
		t.Error("a CA past its end signed a certificate")
	}
}

func TestPendingAgentCSR(t *testing.T) {
	withConditions := func(cs ...certificatesv1.RequestConditionType) func(*certificatesv1.CertificateSigningRequest) {
		return func(c *certificatesv1.CertificateSigningRequest) {
			for _, t := range cs {
				c.Status.Conditions = append(c.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{Type: t, Status: corev1.ConditionTrue})
			}
		}
	}
	issued := func(c *certificatesv1.CertificateSigningRequest) { c.Status.Certificate = []byte("cert") }
	cases := map[string]struct {
		csr  *certificatesv1.CertificateSigningRequest
		want bool
	}{
		"new":                  {csr: agentCSR("c", "a", nil), want: true},
		"approved, not issued": {csr: agentCSR("c", "a", nil, withConditions(certificatesv1.CertificateApproved)), want: true},
		"approved and issued":  {csr: agentCSR("c", "a", nil, withConditions(certificatesv1.CertificateApproved), issued)},
		"denied":               {csr: agentCSR("c", "a", nil, withConditions(certificatesv1.CertificateDenied))},
		"failed":               {csr: agentCSR("c", "a", nil, withConditions(certificatesv1.CertificateApproved, certificatesv1.CertificateFailed))},
		"another signer": {csr: agentCSR("c", "a", nil, func(c *certificatesv1.CertificateSigningRequest) {
			c.Spec.SignerName = "kubernetes.io/kubelet-serving"
		})},
		"kubernetes.io's signer, approved": {csr: agentCSR("c", "a", nil, withConditions(certificatesv1.CertificateApproved), func(c *certificatesv1.CertificateSigningRequest) {
			c.Spec.SignerName = "kubernetes.io/kube-apiserver-client"
		})},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := pendingAgentCSR(tc.csr); got != tc.want {
				t.Errorf("pendingAgentCSR = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestNewAgentCertSigner(t *testing.T) {
	certPEM, keyPEM := testSignerCA(t, time.Now().Add(time.Hour), true)
	r, err := NewAgentCertSigner(nil, nil, SignerOptions{CACertPEM: certPEM, CAKeyPEM: keyPEM, AgentNamespace: "ns", AgentServiceAccount: "sa"})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]any{"system:serviceaccount:ns:sa", 30 * 24 * time.Hour}, []any{r.requester, r.opts.MaxTTL}); diff != "" {
		t.Errorf("requester and default MaxTTL (-want +got):\n%s", diff)
	}
	if _, err := NewAgentCertSigner(nil, nil, SignerOptions{CACertPEM: certPEM, CAKeyPEM: keyPEM, AgentNamespace: "ns"}); err == nil {
		t.Error("a signer without the agents' service account")
	}
	if _, err := NewAgentCertSigner(nil, nil, SignerOptions{CACertPEM: certPEM, AgentNamespace: "ns", AgentServiceAccount: "sa"}); err == nil {
		t.Error("a signer without its CA key")
	}
}

// TestMakeCA: the CA the signer makes may sign certificates and nothing else, and signs
// what it issues.
func TestMakeCA(t *testing.T) {
	now := time.Now()
	certPEM, keyPEM, err := makeCA(now, 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := parseSignerCA(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	if ca.cert.KeyUsage != x509.KeyUsageCertSign|x509.KeyUsageCRLSign || !ca.cert.MaxPathLenZero || ca.cert.NotAfter.Sub(now) > 25*time.Hour {
		t.Errorf("CA usages %v, path length zero %v, until %s", ca.cert.KeyUsage, ca.cert.MaxPathLenZero, ca.cert.NotAfter)
	}
	csr := agentCSR("c", "a", servingRequest(t, ecKey(t), "a", []string{"10.0.0.1"}, x509.CertificateRequest{}))
	node := testNodeWithIPs("a", "10.0.0.1")
	d := decideCSR(csr, node, testAgentRequester, addressBookOf(*node))
	cert := parseIssued(t, ca, d.request, now, time.Hour)
	roots := x509.NewCertPool()
	roots.AddCert(ca.cert)
	if _, err := cert.Verify(x509.VerifyOptions{Roots: roots, CurrentTime: now}); err != nil {
		t.Errorf("an issued certificate does not verify: %v", err)
	}
}

// TestParseSignerCARefusesACertificateThatIsNoCA: a CA Secret holding another kind of
// certificate is refused, with the reason, rather than used to sign.
func TestParseSignerCARefusesACertificateThatIsNoCA(t *testing.T) {
	certPEM, keyPEM := testSignerCA(t, time.Now().Add(time.Hour), false)
	if _, err := parseSignerCA(certPEM, keyPEM); err == nil || !strings.Contains(err.Error(), "is not a CA") {
		t.Errorf("parseSignerCA of a certificate that is no CA: %v", err)
	}
	otherCert, _ := testSignerCA(t, time.Now().Add(time.Hour), true)
	if _, err := parseSignerCA(otherCert, keyPEM); err == nil {
		t.Error("a CA certificate with another's key was accepted")
	}
}

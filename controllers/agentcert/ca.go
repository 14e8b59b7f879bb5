// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package agentcert

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"time"
)

// signerCA is the signer's CA certificate and key.
type signerCA struct {
	cert *x509.Certificate
	key  crypto.Signer
}

// parseSignerCA parses a CA certificate and its key, and checks that they match and that
// the certificate may sign certificates.
func parseSignerCA(certPEM, keyPEM []byte) (*signerCA, error) {
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("loading the signer's CA: %w", err)
	}
	cert := pair.Leaf
	if cert == nil {
		if cert, err = x509.ParseCertificate(pair.Certificate[0]); err != nil {
			return nil, fmt.Errorf("parsing the signer's CA certificate: %w", err)
		}
	}
	if !cert.BasicConstraintsValid || !cert.IsCA {
		return nil, fmt.Errorf("the signer's certificate %q is not a CA", cert.Subject)
	}
	if cert.KeyUsage != 0 && cert.KeyUsage&x509.KeyUsageCertSign == 0 {
		return nil, fmt.Errorf("the signer's CA %q may not sign certificates (key usage)", cert.Subject)
	}
	key, ok := pair.PrivateKey.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("the signer's CA key is a %T, which cannot sign", pair.PrivateKey)
	}
	return &signerCA{cert: cert, key: key}, nil
}

// issue signs a serving certificate for req, valid from 5 minutes before now (clock skew)
// for ttl, but never past the CA's own end. Of the request it takes the public key, the
// common name, the DNS names and IP addresses: checked already, they are the node's.
func (ca *signerCA) issue(req *x509.CertificateRequest, now time.Time, ttl time.Duration) ([]byte, error) {
	notAfter := now.Add(ttl)
	if ca.cert.NotAfter.Before(notAfter) {
		notAfter = ca.cert.NotAfter
	}
	if !notAfter.After(now) {
		return nil, fmt.Errorf("the signer's CA expired at %s", ca.cert.NotAfter)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return nil, fmt.Errorf("drawing a serial number: %w", err)
	}
	usage := x509.KeyUsageDigitalSignature
	if _, ok := req.PublicKey.(*rsa.PublicKey); ok {
		usage |= x509.KeyUsageKeyEncipherment
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: req.Subject.CommonName},
		NotBefore: now.Add(-5 * time.Minute), NotAfter: notAfter,
		KeyUsage: usage, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, BasicConstraintsValid: true,
		DNSNames: req.DNSNames, IPAddresses: req.IPAddresses,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, req.PublicKey, ca.key)
	if err != nil {
		return nil, fmt.Errorf("creating the certificate: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), nil
}

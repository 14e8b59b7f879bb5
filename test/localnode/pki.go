// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package localnode

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// certSpec is one certificate the cluster needs, signed by its own CA.
type certSpec struct {
	name   string // file stem under the pki dir
	cn     string
	orgs   []string
	ips    []net.IP
	dns    []string
	usages []x509.ExtKeyUsage
}

// writePKI makes a fresh CA and the certificates and keys the control plane uses, under
// dir: ca, apiserver (serving), apiserver-kubelet-client (the apiserver's identity towards
// kubelet), and sa (the service-account token signing key pair). Nothing is reused across
// clusters.
func writePKI(dir string, apiserverIPs []net.IP) error { //nolint:funlen // test tooling: one certificate per control-plane identity, in a row
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "numapref-local-ca"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(7 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, caKey.Public(), caKey)
	if err != nil {
		return fmt.Errorf("creating the CA: %w", err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return err
	}
	if err := writeCertAndKey(dir, "ca", caDER, caKey); err != nil {
		return err
	}
	specs := []certSpec{
		{
			name: "apiserver", cn: "kube-apiserver", ips: apiserverIPs,
			dns:    []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"},
			usages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		},
		{
			name: "apiserver-kubelet-client", cn: "kube-apiserver-kubelet-client", orgs: []string{"system:masters"},
			usages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		},
	}
	for i, s := range specs {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return err
		}
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(int64(i + 2)),
			Subject:      pkix.Name{CommonName: s.cn, Organization: s.orgs},
			NotBefore:    now.Add(-time.Hour),
			NotAfter:     now.Add(7 * 24 * time.Hour),
			KeyUsage:     x509.KeyUsageDigitalSignature,
			ExtKeyUsage:  s.usages,
			IPAddresses:  s.ips,
			DNSNames:     s.dns,
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, key.Public(), caKey)
		if err != nil {
			return fmt.Errorf("creating the %s certificate: %w", s.name, err)
		}
		if err := writeCertAndKey(dir, s.name, der, key); err != nil {
			return err
		}
	}
	saKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	if err := writeKey(filepath.Join(dir, "sa.key"), saKey); err != nil {
		return err
	}
	pub, err := x509.MarshalPKIXPublicKey(saKey.Public())
	if err != nil {
		return err
	}
	return writePEM(filepath.Join(dir, "sa.pub"), "PUBLIC KEY", pub)
}

// WritePKI is writePKI for other test harnesses that run a kube-apiserver of their own
// (the kernel lab's test/kernellab/apihost): the same files under dir, the serving
// certificate valid for apiserverIPs.
func WritePKI(dir string, apiserverIPs []net.IP) error { return writePKI(dir, apiserverIPs) }

func writeCertAndKey(dir, name string, der []byte, key crypto.Signer) error {
	if err := writePEM(filepath.Join(dir, name+".crt"), "CERTIFICATE", der); err != nil {
		return err
	}
	return writeKey(filepath.Join(dir, name+".key"), key)
}

func writeKey(path string, key crypto.Signer) error {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return err
	}
	return writePEM(path, "PRIVATE KEY", der)
}

func writePEM(path, kind string, der []byte) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600)
}

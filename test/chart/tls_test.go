// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build chart

package chart

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/numapref/numapref/internal/inspect"
)

const (
	fullname   = release + "-numapref"
	serverName = fullname + "-agent." + namespace + ".svc"
	tlsSecret  = fullname + "-agent-tls"
	caSecret   = fullname + "-signer-ca"
	cmCASecret = fullname + "-cm-ca"
	signerName = fullname + "-signer"
)

func parseCert(t *testing.T, what string, b []byte) *x509.Certificate {
	t.Helper()
	block, _ := pem.Decode(b)
	if block == nil {
		t.Fatalf("%s: no PEM", what)
	}
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return c
}

// caConfigMap checks the published trust anchor and name and returns the anchor: the
// shared certificate itself, which is no CA, so that its key, which the release holds,
// can sign nothing a client accepts.
func caConfigMap(t *testing.T, r rendered) *x509.Certificate {
	t.Helper()
	cm, ok := r.configMaps[inspect.CAConfigMap]
	if !ok {
		t.Fatalf("no ConfigMap %s (what kubectl numapref reads); have %v", inspect.CAConfigMap, keys(r.configMaps))
	}
	if got := cm.Data[inspect.CAConfigMapNameKey]; got != serverName {
		t.Errorf("ConfigMap %s = %q, want %q", inspect.CAConfigMapNameKey, got, serverName)
	}
	anchor := parseCert(t, "ConfigMap ca.crt", []byte(cm.Data[inspect.CAConfigMapCAKey]))
	if anchor.IsCA || anchor.KeyUsage&x509.KeyUsageCertSign != 0 {
		t.Error("the published certificate may sign certificates: its key is in the release")
	}
	if _, ok := r.secrets[caSecret]; ok {
		t.Errorf("the release holds the CA Secret %s", caSecret)
	}
	return anchor
}

// sharedCertificate is the values of one serving certificate for every agent, signed by
// the chart (tls.nodeCertificates off), with the tls values given.
func sharedCertificate(tlsValues map[string]any) map[string]any {
	v := map[string]any{"nodeCertificates": false}
	for k, x := range tlsValues {
		v[k] = x
	}
	return map[string]any{"tls": v}
}

// TestServingCertificate: what the agents serve and how clients verify it, for both ways
// the chart provisions it, and nothing of it without the metrics port.
func TestServingCertificate(t *testing.T) {
	t.Run("generated: self-signed, published, for the published name", func(t *testing.T) {
		r := render(t, sharedCertificate(nil))
		ca := caConfigMap(t, r)
		sec, ok := r.secrets[tlsSecret]
		if !ok || sec.Type != corev1.SecretTypeTLS {
			t.Fatalf("serving Secret %s missing or not kubernetes.io/tls; have %v", tlsSecret, keys(r.secrets))
		}
		if _, err := tls.X509KeyPair(sec.Data["tls.crt"], sec.Data["tls.key"]); err != nil {
			t.Fatalf("serving key pair: %v", err)
		}
		leaf := parseCert(t, "tls.crt", sec.Data["tls.crt"])
		roots := x509.NewCertPool()
		roots.AddCert(ca)
		if _, err := leaf.Verify(x509.VerifyOptions{DNSName: serverName, Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
			t.Errorf("the serving certificate does not verify with the published CA as %s: %v", serverName, err)
		}
		if string(sec.Data["ca.crt"]) != string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.Raw})) {
			t.Error("the serving Secret's ca.crt is not the published certificate")
		}
		// A certificate its key signs does not verify with the anchor: the key is no CA's.
		forged := signWith(t, ca, sec.Data["tls.key"], serverName)
		if _, err := forged.Verify(x509.VerifyOptions{DNSName: serverName, Roots: roots}); err == nil {
			t.Error("a certificate signed with the release's key verifies with the published anchor")
		}
		if _, ok := r.deployments[signerName]; ok {
			t.Error("a signer Deployment with nothing to do")
		}
		if d := time.Until(leaf.NotAfter); d < 364*24*time.Hour || d > 366*24*time.Hour {
			t.Errorf("valid for %s more, want tls.validityDays (365)", d.Round(time.Hour))
		}
		notAfter, err := strconv.ParseInt(sec.Annotations["numapref.io/not-after"], 10, 64)
		if err != nil || abs(notAfter-leaf.NotAfter.Unix()) > 60 {
			t.Errorf("annotation not-after %q, want the certificate's %d (helm upgrade reads it)", sec.Annotations["numapref.io/not-after"], leaf.NotAfter.Unix())
		}
		if got := sec.Annotations["numapref.io/server-name"]; got != serverName {
			t.Errorf("annotation server-name %q, want %q", got, serverName)
		}

		// The name is the agents' Service's: headless, selecting the agent pods.
		svc, ok := r.services[fullname+"-agent"]
		if !ok {
			t.Fatalf("no Service %s-agent, whose DNS name the certificate carries", fullname)
		}
		pod := r.daemonSets[0].Spec.Template
		if svc.Spec.ClusterIP != corev1.ClusterIPNone || !cmp.Equal(svc.Spec.Selector, r.daemonSets[0].Spec.Selector.MatchLabels) {
			t.Errorf("Service: clusterIP %q selector %v; want headless, the agents' selector", svc.Spec.ClusterIP, svc.Spec.Selector)
		}
		if diff := cmp.Diff([]corev1.ServicePort{{Name: "metrics", Port: 8443, TargetPort: intstr.FromString("metrics"), Protocol: corev1.ProtocolTCP}}, svc.Spec.Ports); diff != "" {
			t.Errorf("Service ports (-want +got):\n%s", diff)
		}

		// The agents mount that Secret and serve it; nothing insecure is passed.
		var certDir string
		for _, a := range pod.Spec.Containers[0].Args {
			if v, ok := strings.CutPrefix(a, "--tls-cert-dir="); ok {
				certDir = v
			}
			if strings.Contains(a, "insecure") || a == "--metrics-secure=false" || strings.HasPrefix(a, "--metrics-require-agent-audience") {
				t.Errorf("default arg %s", a)
			}
		}
		mounted := false
		for _, m := range pod.Spec.Containers[0].VolumeMounts {
			for _, v := range pod.Spec.Volumes {
				mounted = mounted || m.Name == v.Name && m.MountPath == certDir && m.ReadOnly && v.Secret != nil && v.Secret.SecretName == tlsSecret
			}
		}
		if certDir == "" || !mounted {
			t.Errorf("--tls-cert-dir=%q is not the read-only mount of Secret %s", certDir, tlsSecret)
		}
	})

	t.Run("generated, shorter life", func(t *testing.T) {
		r := render(t, sharedCertificate(map[string]any{"validityDays": 30, "renewBeforeDays": 5}))
		caConfigMap(t, r)
		leaf := parseCert(t, "tls.crt", r.secrets[tlsSecret].Data["tls.crt"])
		if d := time.Until(leaf.NotAfter); d < 29*24*time.Hour || d > 31*24*time.Hour {
			t.Errorf("valid for %s more, want 30 days", d.Round(time.Hour))
		}
	})

	t.Run("cert-manager: a Certificate for the name, issued by cert-manager's own CA, which the signer publishes", func(t *testing.T) {
		r := render(t, map[string]any{"certManager": map[string]any{"enabled": true, "duration": "720h", "renewBefore": "240h"}},
			"--api-versions", "cert-manager.io/v1")
		if len(r.secrets) != 0 {
			t.Errorf("the release holds Secrets %v: cert-manager makes them", keys(r.secrets))
		}
		if _, ok := r.configMaps[inspect.CAConfigMap]; ok {
			t.Errorf("the release renders ConfigMap %s: the signer publishes cert-manager's CA", inspect.CAConfigMap)
		}
		args := r.deployments[signerName].Spec.Template.Spec.Containers[0].Args
		for _, a := range []string{"--publish-ca-from-secret=" + tlsSecret, "--server-name=" + serverName} {
			if !slices.Contains(args, a) {
				t.Errorf("signer args %v lack %s", args, a)
			}
		}
		if _, ok := r.secrets[tlsSecret]; ok {
			t.Errorf("the chart renders Secret %s: cert-manager owns it", tlsSecret)
		}
		cert, ok := r.other["Certificate/"+fullname+"-agent"]
		if !ok {
			t.Fatalf("no Certificate; have %v", keys(r.other))
		}
		spec := cert["spec"].(map[string]any)
		want := map[string]any{
			"secretName": tlsSecret, "commonName": serverName, "dnsNames": []any{serverName},
			"duration": "720h", "renewBefore": "240h",
			"privateKey": map[string]any{"algorithm": "ECDSA", "size": float64(256), "rotationPolicy": "Always"},
			"usages":     []any{"digital signature", "server auth"},
			"issuerRef":  map[string]any{"group": "cert-manager.io", "kind": "Issuer", "name": cmCASecret},
		}
		delete(spec, "secretTemplate")
		if diff := cmp.Diff(want, spec); diff != "" {
			t.Errorf("Certificate spec (-want +got):\n%s", diff)
		}
		issuer, ok := r.other["Issuer/"+cmCASecret]
		if !ok {
			t.Fatalf("no Issuer %s", cmCASecret)
		}
		if diff := cmp.Diff(map[string]any{"ca": map[string]any{"secretName": cmCASecret}}, issuer["spec"]); diff != "" {
			t.Errorf("Issuer spec (-want +got):\n%s", diff)
		}
		caCert, ok := r.other["Certificate/"+cmCASecret]
		if !ok {
			t.Fatalf("no CA Certificate %s", cmCASecret)
		}
		caSpec := caCert["spec"].(map[string]any)
		if caSpec["isCA"] != true || caSpec["secretName"] != cmCASecret || caSpec["issuerRef"].(map[string]any)["name"] != fullname+"-selfsigned" {
			t.Errorf("CA Certificate spec %v: want a CA into %s from the SelfSigned Issuer", caSpec, cmCASecret)
		}
		if self, ok := r.other["Issuer/"+fullname+"-selfsigned"]; !ok || !cmp.Equal(self["spec"], map[string]any{"selfSigned": map[string]any{}}) {
			t.Errorf("SelfSigned Issuer: %v", self)
		}
		// The agents mount the Secret cert-manager writes.
		var secretName string
		for _, v := range r.daemonSets[0].Spec.Template.Spec.Volumes {
			if v.Secret != nil {
				secretName = v.Secret.SecretName
			}
		}
		if secretName != tlsSecret {
			t.Errorf("the agents mount Secret %q, want %q", secretName, tlsSecret)
		}
	})

	t.Run("cert-manager without its CRDs: refused", func(t *testing.T) {
		_, stderr, err := helmTemplate(t, map[string]any{"certManager": map[string]any{"enabled": true}})
		if err == nil || !strings.Contains(stderr, "certManager.enabled needs cert-manager") {
			t.Errorf("helm template: %v %s; want the missing cert-manager named", err, stderr)
		}
	})

	t.Run("/metrics for the agent audience only", func(t *testing.T) {
		r := render(t, map[string]any{"metrics": map[string]any{"enabled": true, "port": 8443, "requireAgentAudience": true}})
		args := r.daemonSets[0].Spec.Template.Spec.Containers[0].Args
		if !slices.Contains(args, "--metrics-require-agent-audience=true") {
			t.Errorf("args %v lack --metrics-require-agent-audience=true", args)
		}
	})

	t.Run("metrics off: no certificate, CA or Service", func(t *testing.T) {
		r := render(t, map[string]any{"metrics": map[string]any{"enabled": false, "port": 8443}})
		if len(r.secrets)+len(r.configMaps)+len(r.services) != 0 {
			t.Errorf("secrets %v, config maps %v, services %v without the metrics port", keys(r.secrets), keys(r.configMaps), keys(r.services))
		}
	})
}

// signWith makes a certificate for name signed with keyPEM as if by parent.
func signWith(t *testing.T, parent *x509.Certificate, keyPEM []byte, name string) *x509.Certificate {
	t.Helper()
	pair, err := tls.X509KeyPair(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: parent.Raw}), keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: name}, DNSNames: []string{name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, key.Public(), pair.PrivateKey)
	if err != nil {
		t.Fatal(err)
	}
	return parseCert(t, "forged", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}

func abs(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}

// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build chart

package chart

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
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
	caSecret   = fullname + "-agent-ca"
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

// caConfigMap checks the published CA and name and returns the CA certificate.
func caConfigMap(t *testing.T, r rendered) *x509.Certificate {
	t.Helper()
	cm, ok := r.configMaps[inspect.CAConfigMap]
	if !ok {
		t.Fatalf("no ConfigMap %s (what kubectl numapref reads); have %v", inspect.CAConfigMap, keys(r.configMaps))
	}
	if got := cm.Data[inspect.CAConfigMapNameKey]; got != serverName {
		t.Errorf("ConfigMap %s = %q, want %q", inspect.CAConfigMapNameKey, got, serverName)
	}
	ca := parseCert(t, "ConfigMap ca.crt", []byte(cm.Data[inspect.CAConfigMapCAKey]))
	if !ca.IsCA {
		t.Error("the published certificate is not a CA")
	}
	// The CA Secret holds the same certificate, with the key no pod mounts.
	sec, ok := r.secrets[caSecret]
	if !ok || sec.Type != corev1.SecretTypeTLS {
		t.Fatalf("CA Secret %s: %+v", caSecret, sec.Type)
	}
	if string(sec.Data["tls.crt"]) != cm.Data[inspect.CAConfigMapCAKey] {
		t.Error("the CA Secret and the ConfigMap hold different certificates")
	}
	if _, err := tls.X509KeyPair(sec.Data["tls.crt"], sec.Data["tls.key"]); err != nil {
		t.Errorf("CA Secret: %v", err)
	}
	return ca
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
	t.Run("generated: signed by the published CA for the published name", func(t *testing.T) {
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
			t.Error("the serving Secret's ca.crt is not the published CA")
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
		r := render(t, sharedCertificate(map[string]any{"caValidityDays": 100, "validityDays": 30, "renewBeforeDays": 5}))
		caConfigMap(t, r)
		leaf := parseCert(t, "tls.crt", r.secrets[tlsSecret].Data["tls.crt"])
		if d := time.Until(leaf.NotAfter); d < 29*24*time.Hour || d > 31*24*time.Hour {
			t.Errorf("valid for %s more, want 30 days", d.Round(time.Hour))
		}
	})

	t.Run("cert-manager: a Certificate for the name, issued by the chart's CA", func(t *testing.T) {
		r := render(t, map[string]any{"certManager": map[string]any{"enabled": true, "duration": "720h", "renewBefore": "240h"}},
			"--api-versions", "cert-manager.io/v1")
		caConfigMap(t, r)
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
			"issuerRef":  map[string]any{"group": "cert-manager.io", "kind": "Issuer", "name": caSecret},
		}
		delete(spec, "secretTemplate")
		if diff := cmp.Diff(want, spec); diff != "" {
			t.Errorf("Certificate spec (-want +got):\n%s", diff)
		}
		issuer, ok := r.other["Issuer/"+caSecret]
		if !ok {
			t.Fatalf("no Issuer %s", caSecret)
		}
		if diff := cmp.Diff(map[string]any{"ca": map[string]any{"secretName": caSecret}}, issuer["spec"]); diff != "" {
			t.Errorf("Issuer spec (-want +got):\n%s", diff)
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

func abs(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}

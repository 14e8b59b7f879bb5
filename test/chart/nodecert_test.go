// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build chart

package chart

import (
	"crypto/x509"
	"encoding/pem"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// tls.nodeCertificates (on by default): every agent asks for its own node's certificate,
// the signer Deployment makes and alone reads the CA that signs them, and publishes the
// ConfigMap that tells clients to verify the node; the release renders neither. Off,
// without the host network (forkEvents=false) or with cert-manager, the shared certificate
// stays.
func TestNodeCertificates(t *testing.T) {
	for _, tc := range []struct {
		name    string
		values  map[string]any
		perNode bool
	}{
		{name: "default: per node", perNode: true},
		{name: "off: shared", values: map[string]any{"tls": map[string]any{"nodeCertificates": false}}, perNode: false},
		{name: "on, no fork events", values: map[string]any{"forkEvents": false, "tls": map[string]any{"nodeCertificates": true}}, perNode: false},
		{name: "on, cert-manager", values: map[string]any{"certManager": map[string]any{"enabled": true}}, perNode: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := render(t, tc.values, "--api-versions", "cert-manager.io/v1")
			agent := r.daemonSets[0].Spec.Template.Spec
			args := agent.Containers[0].Args
			if got := slices.Contains(args, "--tls-node-certificate"); got != tc.perNode {
				t.Errorf("agent asks for its node certificate: %v, want %v (%v)", got, tc.perNode, args)
			}
			if got := slices.Contains(args, "--tls-cert-dir=/etc/numapref/tls"); got == tc.perNode {
				t.Errorf("agent reads the shared certificate: %v, want %v", got, !tc.perNode)
			}
			_, shared := r.secrets[tlsSecret]
			if _, issued := r.other["Certificate/"+fullname+"-agent"]; issued {
				shared = true // cert-manager's
			}
			if shared == tc.perNode {
				t.Errorf("shared serving certificate rendered: %v, want %v", shared, !tc.perNode)
			}
			if _, rendered := r.configMaps["numapref-agent-ca"]; rendered && tc.perNode {
				t.Error("the release renders the CA ConfigMap: the signer publishes it")
			}
			// No pod mounts a CA's key: the summarizer signs nothing, the signer reads its
			// CA through the API.
			for name, d := range r.deployments {
				for _, v := range d.Spec.Template.Spec.Volumes {
					if v.Secret != nil {
						t.Errorf("Deployment %s mounts Secret %s", name, v.Secret.SecretName)
					}
				}
			}
			signer, ok := r.deployments[signerName]
			if ok != tc.perNode && tc.values["certManager"] == nil {
				t.Fatalf("signer Deployment rendered: %v, want %v", ok, tc.perNode)
			}
			if !tc.perNode {
				return
			}
			spec := signer.Spec.Template.Spec
			for _, a := range []string{"signer", "--ca-secret=" + caSecret, "--agent-service-account=" + fullname, "--owner-service-account=" + signerName, "--ca-validity=87600h"} {
				if !slices.Contains(spec.Containers[0].Args, a) {
					t.Errorf("signer args %v lack %s", spec.Containers[0].Args, a)
				}
			}
			if spec.ServiceAccountName != signerName || *signer.Spec.Replicas != 1 || signer.Spec.Strategy.Type != "Recreate" {
				t.Errorf("signer: service account %s, %d replicas, strategy %s; want its own, one, Recreate", spec.ServiceAccountName, *signer.Spec.Replicas, signer.Spec.Strategy.Type)
			}
			sc := spec.Containers[0].SecurityContext
			if sc == nil || boolString(sc.ReadOnlyRootFilesystem) != "true" || boolString(sc.AllowPrivilegeEscalation) != "false" || len(sc.Capabilities.Add) != 0 {
				t.Errorf("signer securityContext %+v", sc)
			}
			if spec.SecurityContext == nil || spec.SecurityContext.RunAsNonRoot == nil || !*spec.SecurityContext.RunAsNonRoot {
				t.Error("signer may run as root")
			}
			// The CSR rights are the signer's ClusterRole's, and no longer the summarizer's.
			if cr, ok := r.clusterRoles[signerName]; !ok || !grants(cr.Rules, "certificatesigningrequests/approval") {
				t.Errorf("the signer's ClusterRole lacks the approval: %+v", cr.Rules)
			}
			if grants(r.clusterRoles[fullname+"-summarizer"].Rules, "certificatesigningrequests/approval", "signers") {
				t.Error("the summarizer may still approve or sign")
			}
		})
	}
}

// TestNoSigningKeyInTheRelease: whatever the values, no Secret the chart renders holds the
// key of a certificate that may sign others, and only the signer's Role may read a Secret.
func TestNoSigningKeyInTheRelease(t *testing.T) {
	for name, values := range map[string]map[string]any{
		"default":       nil,
		"shared":        {"tls": map[string]any{"nodeCertificates": false}},
		"no fork event": {"forkEvents": false},
		"cert-manager":  {"certManager": map[string]any{"enabled": true}},
		"pod monitor":   {"metrics": map[string]any{"enabled": true, "port": 8443, "podMonitor": map[string]any{"enabled": true}}},
	} {
		t.Run(name, func(t *testing.T) {
			r := render(t, values, "--api-versions", "cert-manager.io/v1", "--api-versions", "monitoring.coreos.com/v1/PodMonitor")
			for sname, sec := range r.secrets {
				if len(sec.Data[corev1.TLSPrivateKeyKey]) == 0 {
					continue
				}
				for rest := sec.Data[corev1.TLSCertKey]; ; {
					var b *pem.Block
					if b, rest = pem.Decode(rest); b == nil {
						break
					}
					c, err := x509.ParseCertificate(b.Bytes)
					if err != nil {
						t.Fatalf("Secret %s: %v", sname, err)
					}
					if c.IsCA || c.KeyUsage&x509.KeyUsageCertSign != 0 {
						t.Errorf("Secret %s holds the key of %q, which may sign certificates", sname, c.Subject)
					}
				}
			}
			for rname, role := range r.roles {
				if rname != signerName && grantsVerb(role.Rules, "secrets", "get", "list", "watch") {
					t.Errorf("Role %s may read Secrets: %+v", rname, role.Rules)
				}
			}
			for rname, cr := range r.clusterRoles {
				if grantsVerb(cr.Rules, "secrets", "get", "list", "watch") {
					t.Errorf("ClusterRole %s may read Secrets: %+v", rname, cr.Rules)
				}
			}
		})
	}
}

// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build chart

package chart

import (
	"slices"
	"testing"
)

// tls.nodeCertificates (on by default): every agent asks for its own node's certificate,
// only the summarizer mounts the CA's key to sign them, and the ConfigMap tells clients to
// verify the node, with no shared name. Off, without the host network (forkEvents=false) or
// with cert-manager, the shared certificate stays.
func TestNodeCertificates(t *testing.T) {
	fullname := release + "-numapref"
	caSecret := fullname + "-agent-ca"
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
			_, shared := r.secrets[fullname+"-agent-tls"]
			if _, issued := r.other["Certificate/"+fullname+"-agent"]; issued {
				shared = true // cert-manager's
			}
			if shared == tc.perNode {
				t.Errorf("shared serving certificate rendered: %v, want %v", shared, !tc.perNode)
			}
			cm := r.configMaps["numapref-agent-ca"].Data
			if got := cm["verify"] == "node"; got != tc.perNode {
				t.Errorf("ConfigMap verify: node: %v, want %v", got, tc.perNode)
			}
			if _, named := cm["serverName"]; named == tc.perNode {
				t.Errorf("ConfigMap serverName published: %v, want %v", named, !tc.perNode)
			}
			// The CA's key: mounted by the summarizer alone, and only per node.
			for _, v := range agent.Volumes {
				if v.Secret != nil && v.Secret.SecretName == caSecret {
					t.Errorf("the agents mount the CA's key")
				}
			}
			sum := r.deployments[fullname+"-summarizer"].Spec.Template.Spec
			mounts := false
			for _, v := range sum.Volumes {
				mounts = mounts || (v.Secret != nil && v.Secret.SecretName == caSecret)
			}
			if mounts != tc.perNode {
				t.Errorf("the summarizer mounts the CA: %v, want %v", mounts, tc.perNode)
			}
			wantArgs := []string{"--agent-signer-ca-dir=/etc/numapref/signer-ca", "--agent-service-account=" + fullname}
			for _, a := range wantArgs {
				if got := slices.Contains(sum.Containers[0].Args, a); got != tc.perNode {
					t.Errorf("summarizer arg %s: %v, want %v", a, got, tc.perNode)
				}
			}
			if tc.perNode {
				for _, m := range sum.Containers[0].VolumeMounts {
					if !m.ReadOnly {
						t.Errorf("summarizer mount %s is writable", m.Name)
					}
				}
			}
		})
	}
}

// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build chart

package chart

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
)

// apiServer and bindAddress: what a cluster without kube-proxy and with listeners kept on
// the loopback (the local node) needs, and nothing of it by default.
func TestAPIServerAndBindAddress(t *testing.T) {
	for name, tc := range map[string]struct {
		values    map[string]any
		extraEnv  []corev1.EnvVar
		probeHost string
		args      []string
	}{
		"defaults": {
			args: []string{"--metrics-bind-address=[$(HOST_IP)]:8443", "--health-probe-bind-address=:8081"},
		},
		"local node": {
			values: map[string]any{"bindAddress": "127.0.0.1", "apiServer": map[string]any{"host": "127.0.0.1", "port": 6443}},
			extraEnv: []corev1.EnvVar{
				{Name: "KUBERNETES_SERVICE_HOST", Value: "127.0.0.1"},
				{Name: "KUBERNETES_SERVICE_PORT", Value: "6443"},
			},
			probeHost: "127.0.0.1",
			args:      []string{"--metrics-bind-address=127.0.0.1:8443", "--health-probe-bind-address=127.0.0.1:8081"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			r := render(t, tc.values)
			if len(r.daemonSets) != 1 {
				t.Fatalf("%d DaemonSets, want 1", len(r.daemonSets))
			}
			c := r.daemonSets[0].Spec.Template.Spec.Containers[0]
			var extra []corev1.EnvVar
			for _, e := range c.Env {
				if e.Name != "NODE_NAME" && e.Name != "POD_NAMESPACE" && e.Name != "POD_NAME" && e.Name != "HOST_IP" {
					extra = append(extra, e)
				}
			}
			if diff := cmp.Diff(tc.extraEnv, extra); diff != "" {
				t.Errorf("env beyond the downward API (-want +got):\n%s", diff)
			}
			for _, p := range []*corev1.Probe{c.LivenessProbe, c.ReadinessProbe} {
				if p == nil || p.HTTPGet == nil || p.HTTPGet.Host != tc.probeHost {
					t.Errorf("probe %+v, want an HTTP probe to host %q", p, tc.probeHost)
				}
			}
			for _, want := range tc.args {
				found := false
				for _, a := range c.Args {
					found = found || a == want
				}
				if !found {
					t.Errorf("args %v lack %s", c.Args, want)
				}
			}
		})
	}
	for name, values := range map[string]map[string]any{
		"port out of range":   {"apiServer": map[string]any{"host": "10.0.0.1", "port": 99999}},
		"unknown key":         {"apiServer": map[string]any{"host": "10.0.0.1", "port": 443, "scheme": "http"}},
		"bind to a host name": {"bindAddress": "localhost"},
	} {
		if _, stderr, err := helmTemplate(t, values); err == nil {
			t.Errorf("%s: helm template accepted %v", name, values)
		} else if !strings.Contains(stderr, "values don't meet the specifications of the schema") {
			t.Errorf("%s: refused, but not by the schema: %s", name, stderr)
		}
	}
}

// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build chart

package chart

import (
	"net"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// TestMetricsBindsTheNodeIP: on the host network (forkEvents, the default) the metrics port
// listens on the node's own IP, which the downward API gives (status.hostIP), and not on
// every address of the node; in the pod's own network namespace it takes every address,
// which are the pod's; bindAddress overrides both.
func TestMetricsBindsTheNodeIP(t *testing.T) {
	for name, tc := range map[string]struct {
		values      map[string]any
		hostNetwork bool
		// want is the address the agent listens on, after kubelet expands $(HOST_IP),
		// for each node IP.
		want map[string]string
	}{
		"defaults: the node IP": {hostNetwork: true,
			want: map[string]string{"10.0.0.7": "10.0.0.7:8443", "fd00::7": "[fd00::7]:8443"}},
		"another port": {values: map[string]any{"metrics": map[string]any{"port": 9443}}, hostNetwork: true,
			want: map[string]string{"10.0.0.7": "10.0.0.7:9443"}},
		"no host network: the pod's addresses": {values: map[string]any{"forkEvents": false},
			want: map[string]string{"10.0.0.7": ":8443"}},
		"bindAddress overrides": {values: map[string]any{"bindAddress": "127.0.0.1"}, hostNetwork: true,
			want: map[string]string{"10.0.0.7": "127.0.0.1:8443"}},
	} {
		t.Run(name, func(t *testing.T) {
			r := render(t, tc.values)
			if len(r.daemonSets) != 1 {
				t.Fatalf("%d DaemonSets, want 1", len(r.daemonSets))
			}
			spec := r.daemonSets[0].Spec.Template.Spec
			if spec.HostNetwork != tc.hostNetwork {
				t.Fatalf("hostNetwork %t, want %t", spec.HostNetwork, tc.hostNetwork)
			}
			c := spec.Containers[0]
			if !hasHostIPEnv(c.Env) {
				t.Errorf("env %+v lacks HOST_IP from the downward API status.hostIP", c.Env)
			}
			var flag string
			for _, a := range c.Args {
				if v, ok := strings.CutPrefix(a, "--metrics-bind-address="); ok {
					flag = v
				}
			}
			for hostIP, want := range tc.want {
				// kubelet's expansion of $(VAR) in args, for the one variable used here.
				got := strings.ReplaceAll(flag, "$(HOST_IP)", hostIP)
				if strings.Contains(got, "$(") {
					t.Fatalf("--metrics-bind-address=%s refers to a variable other than HOST_IP", flag)
				}
				addr, err := net.ResolveTCPAddr("tcp", got)
				if err != nil {
					t.Fatalf("--metrics-bind-address=%s on node %s: %q is no listen address: %v", flag, hostIP, got, err)
				}
				if addr.String() != want {
					t.Errorf("--metrics-bind-address=%s on node %s listens on %s, want %s", flag, hostIP, addr, want)
				}
			}
		})
	}
}

func hasHostIPEnv(env []corev1.EnvVar) bool {
	for _, e := range env {
		if e.Name == "HOST_IP" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "status.hostIP" {
			return true
		}
	}
	return false
}

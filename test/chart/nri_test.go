// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build chart

package chart

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// TestNRI: with nri.enabled, the default, the agent gets --nri-socket, --nri-start-grace and
// the socket's directory, read only, from a hostPath made where the runtime has none (the
// agent runs and reports NRI disconnected, no FailedMount); --nri-required only when asked;
// off, neither.
func TestNRI(t *testing.T) {
	for name, tc := range map[string]struct {
		values   map[string]any
		flags    []string // none when off
		mountDir string
	}{
		"off":           {values: map[string]any{"nri": map[string]any{"enabled": false}}},
		"on by default": {flags: []string{"--nri-socket=/var/run/nri/nri.sock", "--nri-start-grace=2m"}, mountDir: "/var/run/nri"},
		"required": {values: map[string]any{"nri": map[string]any{"required": true}},
			flags: []string{"--nri-socket=/var/run/nri/nri.sock", "--nri-start-grace=2m", "--nri-required"}, mountDir: "/var/run/nri"},
		"another socket, another grace": {values: map[string]any{"nri": map[string]any{"enabled": true, "socket": "/run/crio/nri/nri.sock", "startGrace": "90s"}},
			flags: []string{"--nri-socket=/run/crio/nri/nri.sock", "--nri-start-grace=90s"}, mountDir: "/run/crio/nri"},
	} {
		t.Run(name, func(t *testing.T) {
			r := render(t, tc.values)
			spec := r.daemonSets[0].Spec.Template.Spec
			c := spec.Containers[0]
			flags := slices.DeleteFunc(slices.Clone(c.Args), func(a string) bool { return !strings.HasPrefix(a, "--nri-") })
			if !slices.Equal(flags, tc.flags) {
				t.Errorf("args %v, want %v", flags, tc.flags)
			}
			i := slices.IndexFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == "nri" })
			j := slices.IndexFunc(spec.Volumes, func(v corev1.Volume) bool { return v.Name == "nri" })
			if tc.mountDir == "" {
				if i >= 0 || j >= 0 {
					t.Errorf("an nri mount (%d) or volume (%d) while off", i, j)
				}
				return
			}
			if i < 0 || j < 0 {
				t.Fatalf("no nri mount (%d) or volume (%d)", i, j)
			}
			m, v := c.VolumeMounts[i], spec.Volumes[j]
			if m.MountPath != tc.mountDir || !m.ReadOnly {
				t.Errorf("mount %+v, want %s read-only", m, tc.mountDir)
			}
			if v.HostPath == nil || v.HostPath.Path != tc.mountDir || v.HostPath.Type == nil || *v.HostPath.Type != corev1.HostPathDirectoryOrCreate {
				t.Errorf("volume %+v, want hostPath %s of type DirectoryOrCreate", v.VolumeSource, tc.mountDir)
			}
		})
	}
}

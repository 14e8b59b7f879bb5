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

// numaBalancing.tune adds one privileged init container that runs `numapref
// tune-balancing` with the chart's values (null ones left out), mounts the host's debugfs
// for it, and adds only its own kube-score exception; the agent container is exactly as
// unprivileged as without it. Off by default (TestRender checks there is no init container
// and nothing privileged then).
func TestTuneBalancingInitContainer(t *testing.T) {
	tests := map[string]struct {
		values   map[string]any
		wantArgs []string
	}{
		"no faulting": {
			values: map[string]any{"tune": true, "mode": 1, "scanDelayMs": 4294967295, "scanPeriodMinMs": 4294967295, "scanPeriodMaxMs": 4294967295},
			wantArgs: []string{"tune-balancing", "--debugfs-root=/host/sys/kernel/debug", "--numa-balancing=1",
				"--scan-delay-ms=4294967295", "--scan-period-min-ms=4294967295", "--scan-period-max-ms=4294967295", "--zap-log-level=info"},
		},
		"mode only, a zero delay kept": {
			values:   map[string]any{"tune": true, "mode": 0, "scanDelayMs": 0, "scanSizeMb": 512},
			wantArgs: []string{"tune-balancing", "--debugfs-root=/host/sys/kernel/debug", "--numa-balancing=0", "--scan-delay-ms=0", "--scan-size-mb=512", "--zap-log-level=info"},
		},
	}
	plain := render(t, nil).daemonSets[0].Spec.Template.Spec
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			r := render(t, map[string]any{"numaBalancing": tc.values})
			ds := r.daemonSets[0]
			pod := ds.Spec.Template.Spec
			if len(pod.InitContainers) != 1 {
				t.Fatalf("%d init containers, want 1", len(pod.InitContainers))
			}
			ic := pod.InitContainers[0]
			if ic.Name != "tune-balancing" || ic.Image != pod.Containers[0].Image {
				t.Errorf("init container %s image %s, want tune-balancing with the agent's image", ic.Name, ic.Image)
			}
			if diff := cmp.Diff(tc.wantArgs, ic.Args); diff != "" {
				t.Errorf("init container args (-want +got):\n%s", diff)
			}
			if sc := ic.SecurityContext; sc == nil || boolString(sc.Privileged) != "true" || boolString(sc.ReadOnlyRootFilesystem) != "true" {
				t.Errorf("init container securityContext %+v, want privileged and a read-only root", ic.SecurityContext)
			}
			if diff := cmp.Diff([]corev1.VolumeMount{{Name: "debugfs", MountPath: "/host/sys/kernel/debug"}}, ic.VolumeMounts); diff != "" {
				t.Errorf("init container mounts (-want +got):\n%s", diff)
			}
			dir := corev1.HostPathDirectory
			if diff := cmp.Diff(append(plain.Volumes, corev1.Volume{Name: "debugfs",
				VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/sys/kernel/debug", Type: &dir}}}), pod.Volumes); diff != "" {
				t.Errorf("volumes (-want +got):\n%s", diff)
			}
			// The agent stays as it is without tuning: unprivileged, the same capabilities,
			// no debugfs.
			if diff := cmp.Diff(plain.Containers, pod.Containers); diff != "" {
				t.Errorf("the agent container changed with numaBalancing.tune (-without +with):\n%s", diff)
			}
			ignores := strings.Split(ds.Annotations["kube-score/ignore"], ",")
			plainIgnores := strings.Split(render(t, nil).daemonSets[0].Annotations["kube-score/ignore"], ",")
			if diff := cmp.Diff(append(plainIgnores, "container-security-context-privileged"), ignores, sortStrings); diff != "" {
				t.Errorf("kube-score exceptions (-want +got):\n%s", diff)
			}
		})
	}
}

// Values the kernel would refuse are refused when the chart renders.
func TestTuneBalancingRejects(t *testing.T) {
	tests := map[string]struct {
		values map[string]any
		want   string
	}{
		"mode 4":            {map[string]any{"tune": true, "mode": 4}, "mode"},
		"period above u32":  {map[string]any{"tune": true, "mode": 1, "scanPeriodMaxMs": 4294967296}, "scanPeriodMaxMs"},
		"negative delay":    {map[string]any{"tune": true, "mode": 1, "scanDelayMs": -1}, "scanDelayMs"},
		"scan size 0":       {map[string]any{"tune": true, "mode": 1, "scanSizeMb": 0}, "scanSizeMb"},
		"min above max":     {map[string]any{"tune": true, "mode": 1, "scanPeriodMinMs": 5000, "scanPeriodMaxMs": 1000}, "scanPeriodMinMs 5000 exceeds numaBalancing.scanPeriodMaxMs 1000"},
		"misspelled":        {map[string]any{"tune": true, "mode": 1, "scanDelay": 5}, "scanDelay"},
		"mode given as str": {map[string]any{"tune": true, "mode": "1"}, "mode"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			out, stderr, err := helmTemplate(t, map[string]any{"numaBalancing": tc.values})
			if err == nil {
				t.Fatalf("helm template accepted %v; rendered %d bytes", tc.values, len(out))
			}
			if !strings.Contains(stderr, tc.want) {
				t.Errorf("helm template failed, but not naming %q:\n%s", tc.want, stderr)
			}
		})
	}
}

var sortStrings = cmp.Transformer("sort", func(in []string) []string {
	out := append([]string(nil), in...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
})

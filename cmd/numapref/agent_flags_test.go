// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"flag"
	"runtime/debug"
	"strings"
	"testing"
)

// The metrics port listens on the node's IP (HOST_IP) by default, on every address without
// it, and wherever -metrics-bind-address says when given.
func TestMetricsBindAddressDefault(t *testing.T) {
	for name, tc := range map[string]struct {
		hostIP string
		args   []string
		want   string
	}{
		"node IP":           {hostIP: "10.0.0.5", want: "10.0.0.5:8443"},
		"node IPv6":         {hostIP: "fd00::5", want: "[fd00::5]:8443"},
		"no HOST_IP":        {want: ":8443"},
		"explicit override": {hostIP: "10.0.0.5", args: []string{"-metrics-bind-address=127.0.0.1:9443"}, want: "127.0.0.1:9443"},
		"explicit all":      {hostIP: "10.0.0.5", args: []string{"-metrics-bind-address=:8443"}, want: ":8443"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Setenv("HOST_IP", tc.hostIP)
			var f agentFlags
			fs := flag.NewFlagSet("agent", flag.ContinueOnError)
			f.register(fs)
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			if f.metricsAddr != tc.want {
				t.Errorf("metrics bind address %q, want %q", f.metricsAddr, tc.want)
			}
		})
	}
}

// A share of no task would refuse every container: the agent refuses the flag instead.
func TestMaxTasksPerContainerMustBePositive(t *testing.T) {
	for _, v := range []string{"0", "-1"} {
		err := runAgent([]string{"-node-name=n", "-max-tasks-per-container=" + v})
		if err == nil || !strings.Contains(err.Error(), "-max-tasks-per-container must be at least 1") {
			t.Errorf("-max-tasks-per-container=%s: %v, want it refused", v, err)
		}
	}
}

// A start grace of nothing would undo every start at the next rescan, one of hours would
// keep a start the API never confirms placed as long: the agent refuses both.
func TestNRIStartGraceBounds(t *testing.T) {
	for _, v := range []string{"0s", "999ms", "61m"} {
		err := runAgent([]string{"-node-name=n", "-nri-start-grace=" + v})
		if err == nil || !strings.Contains(err.Error(), "-nri-start-grace must be between 1s and 1h") {
			t.Errorf("-nri-start-grace=%s: %v, want it refused", v, err)
		}
	}
}

// The agent collects at 1.5× the live heap unless GOGC says otherwise.
func TestAgentGCPercent(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	applyGCPercent(func(string) string { return "" })
	if got := debug.SetGCPercent(80); got != agentGCPercent {
		t.Errorf("without GOGC: GOGC %d in force, want %d", got, agentGCPercent)
	}
	applyGCPercent(func(string) string { return "80" })
	if got := debug.SetGCPercent(80); got != 80 {
		t.Errorf("with GOGC=80: GOGC %d in force, want it kept", got)
	}
}

// The flags of FollowDevices and of an emulated topology are checked before anything
// starts: a timeout out of bounds, no DRA attribute, a fake topology on a real kernel.
func TestDeviceAndTopologyFlags(t *testing.T) {
	for args, want := range map[string]string{
		"-pod-resources-timeout=1ms":                       "-pod-resources-timeout must be between 10ms and 1m",
		"-pod-resources-timeout=2m":                        "-pod-resources-timeout must be between 10ms and 1m",
		"-dra-numa-attributes= ,":                          "no attribute name",
		"-numa-topology-root=/tmp/topo":                    "-numa-topology-root emulates a host's NUMA nodes: it needs -kernel=emulated",
		"-numa-topology-root=/tmp/topo -kernel=prctl":      "it needs -kernel=emulated",
		"-pod-resources-timeout=1ms -numa-topology-root=x": "-numa-topology-root",
	} {
		_, err := parseAgentFlags(append([]string{"-node-name=n"}, strings.Fields(args)...))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", args, err, want)
		}
	}
	f, err := parseAgentFlags([]string{"-node-name=n", "-kernel=emulated", "-numa-topology-root=/tmp/topo", "-dra-numa-attributes=numaNode, numa"})
	if err != nil {
		t.Fatal(err)
	}
	if topologyRoot(f) != "/tmp/topo" || strings.Join(f.draNUMAAttributes, ",") != "numaNode,numa" {
		t.Errorf("topology root %q, attributes %v", topologyRoot(f), f.draNUMAAttributes)
	}
}

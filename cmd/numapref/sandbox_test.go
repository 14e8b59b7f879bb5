// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/numapref/numapref/internal/sandbox"
)

// The agent's Landlock ruleset is made of its flags and its API client's configuration:
// what it reads, writes, connects to and binds, and nothing else; none where the agent
// needs ptrace access to other processes.
func TestAgentLandlock(t *testing.T) {
	dir := t.TempDir()
	kubeconfig := func(name, cluster, user string) string {
		path := filepath.Join(dir, name)
		cfg := "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {" + cluster + "}}]\n" +
			"users: [{name: u, user: {" + user + "}}]\ncontexts: [{name: c, context: {cluster: c, user: u}}]\ncurrent-context: c\n"
		if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	// The in-cluster credentials, as kubelet projects them.
	sa := filepath.Join(dir, "serviceaccount")
	if err := os.MkdirAll(sa, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"ca.crt", "token"} {
		if err := os.WriteFile(filepath.Join(sa, name), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	chart := agentFlags{
		kernel: "auto", hostRoot: "/", cgroupRoot: "/host/sys/fs/cgroup", stateDir: "/var/lib/numapref/ns_rel",
		tlsCertDir: "/etc/numapref/tls", metricsAddr: "[10.0.0.7]:8443", probeAddr: ":8081", nriSocket: "/var/run/nri/nri.sock",
		kubeconfig: kubeconfig("chart", `server: "https://10.96.0.1:443", certificate-authority: `+filepath.Join(sa, "ca.crt"),
			`tokenFile: `+filepath.Join(sa, "token")),
	}
	resolver := []string{"/etc/resolv.conf", "/etc/hosts", "/etc/nsswitch.conf"}
	cases := map[string]struct {
		flags   func(f *agentFlags)
		want    *sandbox.Landlock
		wantWhy string
	}{
		// NRI on (the chart's default): the agent reads containers' numa_maps.
		"the chart's agent": {flags: func(*agentFlags) {}, wantWhy: "numa_maps"},
		"the chart's agent, NRI off": {
			flags: func(f *agentFlags) { f.nriSocket = "" },
			want: &sandbox.Landlock{
				ReadOnly:   append(append([]string{"/proc", "/sys", "/host/sys/fs/cgroup", "/etc/numapref/tls"}, resolver...), sa),
				ReadWrite:  []string{"/var/lib/numapref/ns_rel"},
				RemoveDirs: []string{"/var/lib/numapref"},
				TCP:        true, BindTCP: []uint16{8443, 8081}, ConnectTCP: []uint16{443},
			},
		},
		"a host root, no NRI, no metrics, a named API server behind a proxy": {
			flags: func(f *agentFlags) {
				f.hostRoot, f.cgroupRoot, f.tlsCertDir, f.nriSocket, f.metricsAddr = "/host", "", "", "", "0"
				f.kubeconfig = kubeconfig("proxied", `server: "https://api.example:6443", proxy-url: "http://proxy.example:3128"`, `token: t`)
			},
			want: &sandbox.Landlock{
				ReadOnly:   append([]string{"/host/proc", "/proc", "/host/sys", "/sys", "/host/sys/fs/cgroup"}, resolver...),
				ReadWrite:  []string{"/var/lib/numapref/ns_rel"},
				RemoveDirs: []string{"/var/lib/numapref"},
				TCP:        true, BindTCP: []uint16{8081}, ConnectTCP: []uint16{3128, 53},
			},
		},
		"a bind address of any free port: TCP not confined": {
			flags: func(f *agentFlags) { f.probeAddr, f.nriSocket = "127.0.0.1:0", "" },
			want: &sandbox.Landlock{
				ReadOnly:   append(append([]string{"/proc", "/sys", "/host/sys/fs/cgroup", "/etc/numapref/tls"}, resolver...), sa),
				ReadWrite:  []string{"/var/lib/numapref/ns_rel"},
				RemoveDirs: []string{"/var/lib/numapref"},
			},
			wantWhy: "port 0",
		},
		"the emulated kernel": {flags: func(f *agentFlags) { f.kernel = "emulated" }, wantWhy: "kcmp"},
		"the prctl kernel":    {flags: func(f *agentFlags) { f.kernel = "prctl" }, wantWhy: "ptrace access"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			f := chart
			tc.flags(&f)
			got, why := agentLandlock(&f)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("ruleset (-want +got):\n%s", diff)
			}
			if tc.wantWhy == "" && why != "" || !strings.Contains(why, tc.wantWhy) {
				t.Errorf("why = %q, want it to say %q", why, tc.wantWhy)
			}
		})
	}
}

const schedHeader = "numapref (4242, #threads: 7)\n-------------------------------------------------------------------\n"

// The patch's line in /proc/self/sched, and only it, means the prctl can be used.
func TestKernelHasThePatch(t *testing.T) {
	for name, tc := range map[string]struct {
		sched string
		want  bool
	}{
		"patched":  {schedHeader + "numa_preferred_nid                           :                   -1\nnuma_preferred_nid_force                     :                   -1\n", true},
		"mainline": {schedHeader + "numa_preferred_nid                           :                   -1\n", false},
		"no sched": {"", false},
		"garbage":  {"numa_preferred_nid_force : -1\n", false},
	} {
		t.Run(name, func(t *testing.T) {
			proc := t.TempDir()
			if tc.sched != "" {
				if err := os.MkdirAll(filepath.Join(proc, "self"), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(proc, "self", "sched"), []byte(tc.sched), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if got := kernelHasThePatch(proc); got != tc.want {
				t.Errorf("kernelHasThePatch = %v, want %v", got, tc.want)
			}
		})
	}
}

// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package prctl

import (
	"encoding/json"
	"errors"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/numapref/numapref/internal/numa"
)

// TestProbeHere probes this machine: a 6.18 kernel without the patch, where option 78 is
// PR_FUTEX_HASH. It must report the prctl unsupported, say why, and issue no prctl.
func TestProbeHere(t *testing.T) {
	var c countingPrctl
	r := Probe(ProbeOptions{Option: DefaultOption, prctl: c.fn})
	t.Logf("probe of this machine: %s", r)
	if sched, err := readThreadSelfSched("/proc"); err == nil && sched.ForcePresent {
		// A selection, not a precondition: this test is about kernels without the patch
		// (TestProbeFixtures has a patched one).
		t.Skip("this kernel has the PR_PREFERRED_NID patch")
	}
	if n := c.calls.Load(); n != 0 {
		t.Fatalf("Probe issued %d prctl calls on a kernel without proof of support", n)
	}
	if r.Prctl.Supported || r.Prctl.Option != 78 || !strings.Contains(r.Prctl.Reason, "numa_preferred_nid_force") {
		t.Errorf("Prctl = %+v, want unsupported option 78 with the reason", r.Prctl)
	}
	topo, err := numa.DiscoverTopology("/sys")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(topologyReport(topo), r.Topology); diff != "" {
		t.Errorf("Topology (-want +got):\n%s", diff)
	}
	if mode, err := numa.ReadBalancing("/proc"); err == nil && (r.NUMABalancing == nil || r.NUMABalancing.Value != int(mode)) {
		t.Errorf("NUMABalancing = %+v, want %v", r.NUMABalancing, mode)
	}
	if r.ScanKnobs == nil && len(r.Problems) == 0 {
		t.Error("no scan knobs and no problem reported")
	}
	data, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s", data)
	// Every key is lowerCamel.
	for _, key := range regexp.MustCompile(`"([^"]+)":`).FindAllStringSubmatch(string(data), -1) {
		if !regexp.MustCompile(`^([a-z][a-zA-Z0-9]*|[0-9]+)$`).MatchString(key[1]) {
			t.Errorf("JSON key %q is not lowerCamel", key[1])
		}
	}
}

const gib = 1 << 30

func TestProbeFixtures(t *testing.T) {
	knobs := func(source string, delay, min, max, size uint32) *numa.ScanKnobs {
		return &numa.ScanKnobs{Source: source, ScanDelayMs: delay, ScanPeriodMinMs: min, ScanPeriodMaxMs: max, ScanSizeMB: size}
	}
	tests := map[string]struct {
		opts         ProbeOptions
		force        int32
		want         Report
		wantReason   string
		wantProblems []string
		wantCalls    int64
	}{
		"one node, unpatched 6.18": {
			opts: ProbeOptions{ProcRoot: "../testdata/proc/unpatched", SysRoot: "../testdata/sysfs/one-node", DebugfsRoot: "../testdata/debugfs/default"},
			want: Report{
				KernelRelease: "6.18.44-fc-v782",
				Prctl:         numa.Support{Backend: "prctl", Option: 78},
				NUMABalancing: &BalancingReport{Value: 0, Mode: "disabled"},
				ScanKnobs:     knobs("../testdata/debugfs/default/sched/numa_balancing", 1000, 1000, 60000, 256),
				Topology: &TopologyReport{Online: "0", Possible: "0", HasMemory: "0", Nodes: []NodeReport{
					{ID: 0, CPUs: "0-3", MemTotalBytes: 8 * gib, Distances: map[int]int{0: 10}},
				}},
			},
			wantReason: "no numa_preferred_nid_force line",
		},
		"two nodes, patched, option 79": {
			opts: ProbeOptions{ProcRoot: "../testdata/proc/patched", SysRoot: "../testdata/sysfs/two-nodes", DebugfsRoot: "../testdata/debugfs/no-faults", Option: 79},
			want: Report{
				KernelRelease: "6.12.117-numapref",
				Prctl:         numa.Support{Supported: true, Backend: "prctl", Option: 79},
				NUMABalancing: &BalancingReport{Value: 1, Mode: "normal"},
				ScanKnobs:     knobs("../testdata/debugfs/no-faults/sched/numa_balancing", 4294967295, 4294967295, 4294967295, 256),
				Topology: &TopologyReport{Online: "0-1", Possible: "0-1", HasMemory: "0-1", Nodes: []NodeReport{
					{ID: 0, CPUs: "0-3", MemTotalBytes: 16 * gib, Distances: map[int]int{0: 10, 1: 21}},
					{ID: 1, CPUs: "4-7", MemTotalBytes: 16 * gib, Distances: map[int]int{0: 21, 1: 10}},
				}},
			},
			force: -1, wantReason: "prctl(79, GET) agreed", wantCalls: 1,
		},
		"sparse nodes, memory tiering, debugfs unmounted": {
			opts: ProbeOptions{ProcRoot: "../testdata/proc/tiering", SysRoot: "../testdata/sysfs/sparse", DebugfsRoot: "../testdata/debugfs/absent"},
			want: Report{
				KernelRelease: "6.18.44",
				Prctl:         numa.Support{Backend: "prctl", Option: 78},
				NUMABalancing: &BalancingReport{Value: 2, Mode: "memory-tiering"},
				Topology: &TopologyReport{Online: "0,2", Possible: "0,2", HasMemory: "0,2", Nodes: []NodeReport{
					{ID: 0, CPUs: "0-1", MemTotalBytes: 4 * gib, Distances: map[int]int{0: 10, 2: 20}},
					{ID: 2, CPUs: "2-3", MemTotalBytes: 4 * gib, Distances: map[int]int{0: 20, 2: 10}},
				}},
			},
			wantReason: "no numa_preferred_nid_force line", wantProblems: []string{"scan knob"},
		},
		"memoryless node, both balancing modes": {
			opts: ProbeOptions{ProcRoot: "../testdata/proc/both", SysRoot: "../testdata/sysfs/memoryless", DebugfsRoot: "../testdata/debugfs/default"},
			want: Report{
				KernelRelease: "6.18.44",
				Prctl:         numa.Support{Backend: "prctl", Option: 78},
				NUMABalancing: &BalancingReport{Value: 3, Mode: "normal+memory-tiering"},
				ScanKnobs:     knobs("../testdata/debugfs/default/sched/numa_balancing", 1000, 1000, 60000, 256),
				Topology: &TopologyReport{Online: "0-1", Possible: "0-1", HasMemory: "0", Nodes: []NodeReport{
					{ID: 0, CPUs: "0-1", MemTotalBytes: 8 * gib, Distances: map[int]int{0: 10, 1: 20}},
					{ID: 1, CPUs: "2-3", MemTotalBytes: 0, Distances: map[int]int{0: 20, 1: 10}},
				}},
			},
			wantReason: "no numa_preferred_nid_force line",
		},
		"eight nodes, knobs as sysctls": {
			opts: ProbeOptions{ProcRoot: "../testdata/proc/old-kernel", SysRoot: "../testdata/sysfs/eight-nodes", DebugfsRoot: "../testdata/debugfs/absent"},
			want: Report{
				KernelRelease: "5.10.0",
				Prctl:         numa.Support{Backend: "prctl", Option: 78},
				NUMABalancing: &BalancingReport{Value: 1, Mode: "normal"},
				ScanKnobs:     knobs("../testdata/proc/old-kernel/sys/kernel", 1000, 1000, 60000, 256),
				Topology: func() *TopologyReport {
					topo, err := numa.DiscoverTopology("../testdata/sysfs/eight-nodes")
					if err != nil {
						t.Fatal(err)
					}
					return topologyReport(topo)
				}(),
			},
			wantReason: "no numa_preferred_nid_force line",
		},
		"no NUMA at all": {
			opts: ProbeOptions{ProcRoot: "../testdata/proc/no-numa-balancing", SysRoot: "../testdata/sysfs/no-numa", DebugfsRoot: "../testdata/debugfs/absent"},
			want: Report{
				KernelRelease: "6.18.44-tiny",
				Prctl:         numa.Support{Backend: "prctl", Option: 78},
				Topology: &TopologyReport{Online: "0", Possible: "0", HasMemory: "0", Synthetic: true, Nodes: []NodeReport{
					{ID: 0, CPUs: "0-1", Distances: map[int]int{0: 10}},
				}},
			},
			wantReason: "no NUMA lines", wantProblems: []string{"numa_balancing", "scan knob"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c := countingPrctl{force: tc.force}
			tc.opts.prctl = c.fn
			got := Probe(tc.opts)
			if !strings.Contains(got.Prctl.Reason, tc.wantReason) {
				t.Errorf("Prctl.Reason %q does not contain %q", got.Prctl.Reason, tc.wantReason)
			}
			got.Prctl.Reason = ""
			if len(got.Problems) != len(tc.wantProblems) {
				t.Errorf("Problems %q, want %d containing %q", got.Problems, len(tc.wantProblems), tc.wantProblems)
			}
			for i, p := range tc.wantProblems {
				if i < len(got.Problems) && !strings.Contains(got.Problems[i], p) {
					t.Errorf("Problems[%d] = %q, want it to mention %q", i, got.Problems[i], p)
				}
			}
			got.Problems = nil
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			if n := c.calls.Load(); n != tc.wantCalls {
				t.Errorf("%d prctl calls, want %d", n, tc.wantCalls)
			}
		})
	}
}

// On Linux 7.0 mainline has taken the patch's option numbers: 78 is PR_FUTEX_HASH (6.16),
// 79 PR_RSEQ_SLICE_EXTENSION (7.0: the patch's SET shape returns 0 there), 80 and 81
// PR_GET_CFI and PR_SET_CFI. On such a kernel without the patch (no
// numa_preferred_nid_force line) -kernel=auto with any of them issues no prctl at all, and
// says which call the number is.
func TestProbeIssuesNoPrctlOnLinux70(t *testing.T) {
	tests := map[int]string{
		78: "PR_FUTEX_HASH",
		79: "PR_RSEQ_SLICE_EXTENSION",
		80: "PR_GET_CFI",
		81: "PR_SET_CFI",
	}
	for option, mainline := range tests {
		t.Run(mainline, func(t *testing.T) {
			var c countingPrctl
			r := Probe(ProbeOptions{ProcRoot: "../testdata/proc/linux-7.0", SysRoot: "../testdata/sysfs/two-nodes",
				DebugfsRoot: "../testdata/debugfs/default", Option: option, prctl: c.fn})
			if r.KernelRelease != "7.0.3" || r.Prctl.Supported || r.Prctl.Option != option {
				t.Errorf("kernel %q, Prctl %+v; want 7.0.3, option %d unsupported", r.KernelRelease, r.Prctl, option)
			}
			for _, want := range []string{"no numa_preferred_nid_force line", "no prctl was issued", mainline} {
				if !strings.Contains(r.Prctl.Reason, want) {
					t.Errorf("Reason %q does not say %q", r.Prctl.Reason, want)
				}
			}

			// What the agent's -kernel=auto does with the backend: every call refused, none issued.
			p, support := newPrctl(option, "../testdata/proc/linux-7.0", c.fn)
			if _, err := p.Get(0); !errors.Is(err, ErrUnsupported) {
				t.Errorf("Get = %v, want ErrUnsupported", err)
			}
			if err := p.Set(0, 1); !errors.Is(err, ErrUnsupported) {
				t.Errorf("Set = %v, want ErrUnsupported", err)
			}
			if support.Supported {
				t.Errorf("support %+v", support)
			}
			if n := c.calls.Load(); n != 0 {
				t.Errorf("%d prctl calls (options %v) on a kernel without the patch, want 0", n, c.options)
			}
		})
	}
}

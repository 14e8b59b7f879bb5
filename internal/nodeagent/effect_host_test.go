// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build host && linux

package nodeagent

import (
	"bufio"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/numapref/numapref/internal/nodeagent/desire"
	"github.com/numapref/numapref/internal/numa"
)

// The cgroup v1 source of the memory metrics is the numa_maps of the container's real
// processes, each counted once however many threads it has: the sum must match the
// processes' resident set sizes, which the kernel counts independently. The source reads
// only /proc, so the collector is given cgroup version 1 whatever this host's is.
func TestEffectCollectorRealProcessesNumaMaps(t *testing.T) {
	el := newEngineLab(t)
	w, _, d := el.container(t, "a", 0, 4)
	shell, forked, err := w.Fork() // two more processes in the container
	if err != nil {
		t.Fatal(err)
	}
	e := el.engine(t)
	e.SetDesired([]desire.Desire{d})
	el.settle(t, e, w.Pid(), shell, forked)

	managed := e.Managed()
	if len(managed) != 1 {
		t.Fatalf("Managed() = %+v, want one container", managed)
	}
	mc := managed[0]
	if want := []int{w.Pid(), shell, forked}; !sameSet(mc.PIDs, want) {
		t.Fatalf("Managed PIDs = %v, want %v", mc.PIDs, want)
	}
	c := NewEffectCollector(e, el.resolver.ProcRoot(), 1)

	var rss uint64
	for _, pid := range mc.PIDs {
		rss += vmRSS(t, pid)
	}
	got := gaugeValue(t, c, "numapref_container_memory_bytes", map[string]string{"namespace": "ns", "pod": "a", "container": "main", "numa_node": "0"})
	// Pages mapped (numa_maps) and resident pages (VmRSS) are counted by different kernel
	// code; both move as the processes run, so allow a small difference. Counting every
	// thread's process again would multiply the sum by at least 5.
	if diff := math.Abs(got - float64(rss)); diff > 0.1*float64(rss) {
		t.Errorf("memory on node 0 = %.0f bytes, want about the processes' VmRSS %d", got, rss)
	}
	if got := gaugeValue(t, c, "numapref_container_memory_locality_ratio", map[string]string{"pod": "a"}); got != 1 {
		t.Errorf("locality on a one-node host = %v, want 1", got)
	}
	var faults uint64
	for _, tid := range mc.TIDs {
		if s, err := numa.ReadSchedNUMA("/proc", tid); err == nil {
			faults += s.TotalFaults
		}
	}
	if got := gaugeValue(t, c, "numapref_container_numa_faults", map[string]string{"pod": "a"}); got < float64(faults) {
		t.Errorf("numa faults = %v, want at least %d (the kernel's sum a moment before)", got, faults)
	}
	if v := readErrors(t, c, effectSourceNumaMaps); v != 0 {
		t.Errorf("numa_maps read errors = %v, want 0", v)
	}
}

func vmRSS(t *testing.T, pid int) uint64 {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if rest, ok := strings.CutPrefix(s.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatalf("no VmRSS for %d", pid)
	return 0
}

// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package prctl

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/numapref/numapref/internal/numa"
)

// ProbeOptions names the roots Probe reads and the prctl option it checks.
type ProbeOptions struct {
	// ProcRoot, SysRoot and DebugfsRoot default to "/proc", "/sys" and "/sys/kernel/debug".
	ProcRoot, SysRoot, DebugfsRoot string
	// Option is PR_PREFERRED_NID's number; 0 means DefaultOption.
	Option int

	// prctl replaces the system call in tests.
	prctl prctlFunc
}

// Report is what Probe found out about this node's kernel.
type Report struct {
	// KernelRelease is the running kernel's release (kernel.osrelease).
	KernelRelease string `json:"kernelRelease,omitempty"`
	// Prctl says whether PR_PREFERRED_NID can be used, with which option, and why.
	Prctl numa.Support `json:"prctl"`
	// NUMABalancing is kernel.numa_balancing; nil if the kernel has no NUMA balancing.
	NUMABalancing *BalancingReport `json:"numaBalancing,omitempty"`
	// ScanKnobs are the balancing scan parameters; nil if unreadable (debugfs unmounted or
	// root-only).
	ScanKnobs *numa.ScanKnobs `json:"scanKnobs,omitempty"`
	// Topology is the NUMA topology; nil if sysfs could not be read.
	Topology *TopologyReport `json:"topology,omitempty"`
	// Problems lists what could not be read, and why.
	Problems []string `json:"problems,omitempty"`
}

// BalancingReport is kernel.numa_balancing as a number and a name.
type BalancingReport struct {
	Value int    `json:"value"`
	Mode  string `json:"mode"`
}

// TopologyReport is numa.Topology in a form meant for reading.
type TopologyReport struct {
	Online    string       `json:"online"`
	Possible  string       `json:"possible"`
	HasMemory string       `json:"hasMemory"`
	Nodes     []NodeReport `json:"nodes"`
	Synthetic bool         `json:"synthetic,omitempty"`
}

// NodeReport describes one online node.
type NodeReport struct {
	ID            int    `json:"id"`
	CPUs          string `json:"cpus"`
	MemTotalBytes uint64 `json:"memTotalBytes"`
	// Distances maps node ids to the distance from this node.
	Distances map[int]int `json:"distances"`
}

// Probe reports the kernel facts numapref depends on. It never fails: what it cannot read
// is left out and explained in Problems. It issues no prctl unless the kernel proves
// PR_PREFERRED_NID support (see New).
func Probe(opts ProbeOptions) Report {
	procRoot, sysRoot, debugfsRoot := opts.ProcRoot, opts.SysRoot, opts.DebugfsRoot
	if procRoot == "" {
		procRoot = "/proc"
	}
	if sysRoot == "" {
		sysRoot = "/sys"
	}
	if debugfsRoot == "" {
		debugfsRoot = filepath.Join(sysRoot, "kernel", "debug")
	}
	option := opts.Option
	if option == 0 {
		option = DefaultOption
	}
	fn := opts.prctl
	if fn == nil {
		fn = rawPrctl
	}

	var r Report
	if data, err := os.ReadFile(filepath.Join(procRoot, "sys", "kernel", "osrelease")); err == nil {
		r.KernelRelease = strings.TrimSpace(string(data))
	}
	_, r.Prctl = newPrctl(option, procRoot, fn)

	if mode, err := numa.ReadBalancing(procRoot); err != nil {
		r.Problems = append(r.Problems, err.Error())
	} else {
		r.NUMABalancing = &BalancingReport{Value: int(mode), Mode: mode.String()}
	}
	if knobs, err := numa.ReadScanKnobs(procRoot, debugfsRoot); errors.Is(err, fs.ErrNotExist) {
		r.Problems = append(r.Problems, fmt.Sprintf("%v (is debugfs mounted at %s?)", err, debugfsRoot))
	} else if err != nil {
		r.Problems = append(r.Problems, err.Error())
	} else {
		r.ScanKnobs = &knobs
	}
	if topo, err := numa.DiscoverTopology(sysRoot); err != nil {
		r.Problems = append(r.Problems, err.Error())
	} else {
		r.Topology = topologyReport(topo)
	}
	return r
}

func topologyReport(t *numa.Topology) *TopologyReport {
	tr := &TopologyReport{
		Online:    numa.FormatList(t.Online),
		Possible:  numa.FormatList(t.Possible),
		HasMemory: numa.FormatList(t.HasMemory),
		Synthetic: t.Synthetic,
	}
	for _, id := range t.Online {
		n := t.Nodes[id]
		tr.Nodes = append(tr.Nodes, NodeReport{
			ID:            id,
			CPUs:          numa.FormatList(n.CPUs),
			MemTotalBytes: n.MemTotalBytes,
			Distances:     n.Distances,
		})
	}
	return tr
}

// String is a one-line summary, for logs.
func (r Report) String() string {
	nodes := "?"
	if r.Topology != nil {
		nodes = r.Topology.Online
	}
	balancing := "?"
	if r.NUMABalancing != nil {
		balancing = r.NUMABalancing.Mode
	}
	return fmt.Sprintf("kernel %s, PR_PREFERRED_NID(%d) supported=%v, numa_balancing=%s, nodes %s",
		r.KernelRelease, r.Prctl.Option, r.Prctl.Supported, balancing, nodes)
}

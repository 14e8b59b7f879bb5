package numa

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// ProbeOptions names the roots Probe reads and the prctl option it checks.
type ProbeOptions struct {
	// ProcRoot, SysRoot and DebugfsRoot default to "/proc", "/sys" and "/sys/kernel/debug".
	ProcRoot, SysRoot, DebugfsRoot string
	// Option is PR_PREFERRED_NID's number; 0 means DefaultPrctlOption.
	Option int

	// prctl replaces the system call in tests.
	prctl prctlFunc
}

// Report is what Probe found out about this node's kernel.
type Report struct {
	// KernelRelease is the running kernel's release (kernel.osrelease).
	KernelRelease string `json:"kernelRelease,omitempty"`
	// Prctl says whether PR_PREFERRED_NID can be used, with which option, and why.
	Prctl Support `json:"prctl"`
	// NUMABalancing is kernel.numa_balancing; nil if the kernel has no NUMA balancing.
	NUMABalancing *BalancingReport `json:"numaBalancing,omitempty"`
	// ScanKnobs are the balancing scan parameters; nil if unreadable (debugfs unmounted or
	// root-only).
	ScanKnobs *ScanKnobs `json:"scanKnobs,omitempty"`
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

// TopologyReport is Topology in a form meant for reading.
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
// PR_PREFERRED_NID support (see NewPrctl).
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
		option = DefaultPrctlOption
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

	if mode, err := ReadBalancing(procRoot); err != nil {
		r.Problems = append(r.Problems, err.Error())
	} else {
		r.NUMABalancing = &BalancingReport{Value: int(mode), Mode: mode.String()}
	}
	if knobs, err := ReadScanKnobs(procRoot, debugfsRoot); errors.Is(err, fs.ErrNotExist) {
		r.Problems = append(r.Problems, fmt.Sprintf("%v (is debugfs mounted at %s?)", err, debugfsRoot))
	} else if err != nil {
		r.Problems = append(r.Problems, err.Error())
	} else {
		r.ScanKnobs = &knobs
	}
	if topo, err := DiscoverTopology(sysRoot); err != nil {
		r.Problems = append(r.Problems, err.Error())
	} else {
		r.Topology = topologyReport(topo)
	}
	return r
}

func topologyReport(t *Topology) *TopologyReport {
	tr := &TopologyReport{
		Online:    FormatList(t.Online),
		Possible:  FormatList(t.Possible),
		HasMemory: FormatList(t.HasMemory),
		Synthetic: t.Synthetic,
	}
	for _, id := range t.Online {
		n := t.Nodes[id]
		tr.Nodes = append(tr.Nodes, NodeReport{
			ID:            id,
			CPUs:          FormatList(n.CPUs),
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

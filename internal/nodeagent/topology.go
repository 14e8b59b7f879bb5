package nodeagent

import (
	"maps"
	"slices"
)

// topology is the host's NUMA nodes online and the node of each CPU, as a full pass read
// them (EngineConfig.Topology): nodes and CPUs taken offline or brought online are seen at
// the next full pass, without a restart.
type topology struct {
	nodes   []int // online, sorted
	online  map[int]bool
	cpuNode map[int]int
}

func newTopology(nodes []int, cpuNode map[int]int) topology {
	t := topology{nodes: slices.Sorted(slices.Values(nodes)), online: make(map[int]bool, len(nodes)), cpuNode: cpuNode}
	for _, n := range nodes {
		t.online[n] = true
	}
	return t
}

// readTopology reads the host's topology again for a full pass. A failed read keeps the
// last one: a passing sysfs error must not make every container NodeNotPresent.
func (e *Engine) readTopology() {
	if e.cfg.Topology == nil {
		return
	}
	on, err := e.cfg.Topology()
	if err != nil {
		e.cfg.Log.Error(err, "Reading the NUMA topology; keeping the last one read")
		return
	}
	if !slices.Equal(on.Nodes, e.topo.nodes) || !maps.Equal(on.CPUNode, e.topo.cpuNode) {
		e.cfg.Log.Info("The NUMA topology changed", "online", on.Nodes, "was", e.topo.nodes)
	}
	e.topo = newTopology(on.Nodes, on.CPUNode)
}

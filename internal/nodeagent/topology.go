package nodeagent

import (
	"maps"
	"slices"
	"time"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
)

// topologyEvery is how often a full pass reads the topology again when nothing else asks
// for it. Hotplug has no event the agent follows, and a read at every rescan (every node's
// cpulist) was most of an idle pass without the emulator; a node or CPU taken offline is
// seen within this time instead of the next rescan.
const topologyEvery = time.Minute

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

// readTopology reads the host's topology again for a full pass, when it is due (see
// topologyDue). A failed read keeps the last one: a passing sysfs error must not make
// every container NodeNotPresent.
func (e *Engine) readTopology(gen uint64) {
	if e.cfg.Topology == nil || !e.topologyDue(gen) {
		return
	}
	on, err := e.cfg.Topology()
	if err != nil {
		e.cfg.Log.Error(err, "Reading the NUMA topology; keeping the last one read")
		return // read again at the next full pass
	}
	e.topoRead, e.topoGen = e.cfg.Clock.Now(), gen
	if !slices.Equal(on.Nodes, e.topo.nodes) || !maps.Equal(on.CPUNode, e.topo.cpuNode) {
		e.cfg.Log.Info("The NUMA topology changed", "online", on.Nodes, "was", e.topo.nodes)
	}
	e.topo = newTopology(on.Nodes, on.CPUNode)
}

// topologyDue says whether a full pass of desire generation gen reads the topology: the
// first pass, once topologyEvery passed since the last read, when the desired state
// changed since then (a new pod's node is checked against the host as it is), and while a
// container's node is not present (one brought back online is targeted at the next
// rescan). The caller holds passMu.
func (e *Engine) topologyDue(gen uint64) bool {
	if e.topoRead.IsZero() || gen != e.topoGen || e.cfg.Clock.Since(e.topoRead) >= topologyEvery {
		return true
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, r := range e.results {
		if r.Reason == numav1.ReasonNodeNotPresent {
			return true
		}
	}
	return false
}

// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package nodeagent

import (
	"time"

	"github.com/numapref/numapref/internal/nodeagent/plan"
)

// topologyEvery is how often a full pass reads the topology again when nothing else asks
// for it. Hotplug has no event the agent follows, and a read at every rescan (every node's
// cpulist) was most of an idle pass without the emulator; a node or CPU taken offline is
// seen within this time instead of the next rescan.
const topologyEvery = time.Minute

// readTopology reads the host's topology again for a full pass of desire generation gen,
// when it is due (see topologyDue; nodeNotPresent says whether a container's node is not
// present). A failed read keeps the last one: a passing sysfs error must not make every
// container NodeNotPresent.
func (m *placementMemory) readTopology(gen uint64, nodeNotPresent func() bool) {
	if m.readTopo == nil || !m.topologyDue(gen, nodeNotPresent) {
		return
	}
	on, err := m.readTopo()
	if err != nil {
		m.log.Error(err, "Reading the NUMA topology; keeping the last one read")
		return // read again at the next full pass
	}
	m.topoRead, m.topoGen = m.clock.Now(), gen
	if !m.topo.Same(on) {
		m.log.Info("The NUMA topology changed", "online", on.Nodes, "was", m.topo.Nodes())
	}
	m.setTopology(plan.NewTopology(on.Nodes, on.CPUNode))
}

// setTopology sets the topology, and its copy for readers without passMu (lastTopology).
func (m *placementMemory) setTopology(t plan.Topology) {
	m.topo = t
	m.shared.Store(&t)
}

// lastTopology is the topology last read, for a reader that does not hold passMu.
func (m *placementMemory) lastTopology() plan.Topology { return *m.shared.Load() }

// topologyDue says whether a full pass of desire generation gen reads the topology: the
// first pass, once topologyEvery passed since the last read, when the desired state
// changed since then (a new pod's node is checked against the host as it is), and while a
// container's node is not present (one brought back online is targeted at the next
// rescan).
func (m *placementMemory) topologyDue(gen uint64, nodeNotPresent func() bool) bool {
	return m.topoRead.IsZero() || gen != m.topoGen || m.clock.Since(m.topoRead) >= topologyEvery || nodeNotPresent()
}

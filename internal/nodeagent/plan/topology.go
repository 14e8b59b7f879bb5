// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package plan

import (
	"maps"
	"slices"

	"github.com/numapref/numapref/internal/numa"
)

// Topology is the host's NUMA nodes online and the node of each CPU, as the engine last
// read them.
type Topology struct {
	nodes   []int // online, sorted
	online  map[int]bool
	cpuNode map[int]int
}

// NewTopology is the topology of the online nodes and cpuNode, the node of each CPU.
func NewTopology(nodes []int, cpuNode map[int]int) Topology {
	t := Topology{nodes: slices.Sorted(slices.Values(nodes)), online: make(map[int]bool, len(nodes)), cpuNode: cpuNode}
	for _, n := range nodes {
		t.online[n] = true
	}
	return t
}

// Nodes are the online nodes, sorted.
func (t Topology) Nodes() []int { return slices.Clone(t.nodes) }

// Same says whether on is this topology.
func (t Topology) Same(on numa.Online) bool {
	return slices.Equal(on.Nodes, t.nodes) && maps.Equal(on.CPUNode, t.cpuNode)
}

// cpusPerNode counts cpus by node, and says whether they span every node of a host of
// more than one.
func (t Topology) cpusPerNode(cpus []int) (perNode map[int]int, spans bool) {
	perNode = map[int]int{}
	for _, cpu := range cpus {
		if n, ok := t.cpuNode[cpu]; ok {
			perNode[n]++
		}
	}
	touched := 0
	for _, n := range t.nodes {
		if perNode[n] > 0 {
			touched++
		}
	}
	return perNode, len(t.nodes) > 1 && touched == len(t.nodes)
}

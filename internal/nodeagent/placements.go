// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package nodeagent

import (
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/utils/clock"

	"github.com/numapref/numapref/internal/fsutil"
	"github.com/numapref/numapref/internal/nodeagent/desire"
	"github.com/numapref/numapref/internal/nodeagent/known"
	"github.com/numapref/numapref/internal/nodeagent/plan"
	"github.com/numapref/numapref/internal/numa"
)

// placementMemory is what the engine remembers of where containers go, from pass to pass:
// the sticky choices of Spread and MostFreeMemory and their file (choices.go), every
// automatic container's node as the last resolving pass chose it, the host's topology
// and when it is read again (topology.go), and how each container was first placed
// (placedat.go). The engine's passMu guards it, but for placedAt.
type placementMemory struct {
	choicesPath string // "" keeps the choices in memory only
	choices     plan.Choices
	resolved    plan.Resolutions
	// held are the choices made at a container's creation, until when they are kept
	// though their pods are not desired yet (plan.Input.Held).
	held map[plan.ChoiceKey]time.Time

	// topo is the host's online nodes and CPUs as a full pass last read them, at topoRead
	// for desire generation topoGen; readTopo reads them (nil: never again).
	topo     plan.Topology
	shared   atomic.Pointer[plan.Topology] // topo, for lastTopology
	topoRead time.Time
	topoGen  uint64
	readTopo func() (numa.Online, error)

	// placedAt says how each container was first placed; bootAtStart is CLOCK_BOOTTIME
	// when the engine was made (bootAtStartOK false: unreadable), boottime reads it now.
	// placedMu guards placedAt: the start lane judges without the pass lock.
	placedMu      sync.Mutex
	placedAt      map[desire.ContainerKey]string
	bootAtStart   uint64
	bootAtStartOK bool
	boottime      func() (uint64, bool)

	clock clock.PassiveClock
	log   logr.Logger
}

// newPlacementMemory remembers what cfg's files say, and that the containers the ledger
// knows at start were placed before it. A damaged choices file yields no choices and an
// error: pods are then placed anew, as on a first start.
func newPlacementMemory(cfg EngineConfig, known known.View) (*placementMemory, error) {
	m := &placementMemory{
		choicesPath: cfg.ChoicesPath, readTopo: cfg.Topology,
		placedAt: placedBeforeRestart(known), boottime: cfg.Boottime, clock: cfg.Clock, log: cfg.Log,
		held: map[plan.ChoiceKey]time.Time{},
	}
	m.setTopology(plan.NewTopology(cfg.OnlineNodes, cfg.CPUNode))
	m.bootAtStart, m.bootAtStartOK = cfg.Boottime()
	if m.choicesPath != "" {
		removeStaleTemps(m.choicesPath, cfg.Log)
	}
	var err error
	m.choices, err = loadChoices(cfg.ChoicesPath)
	return m, err
}

// removeStaleTemps removes, and logs, the temporary files killed writes of the state file
// at path left.
func removeStaleTemps(path string, log logr.Logger) {
	if n, err := fsutil.RemoveStaleTemps(path); err != nil {
		log.Error(err, "Removing stale temporary files", "file", path)
	} else if n > 0 {
		log.Info("Removed temporary files a killed write left", "file", path, "files", n)
	}
}

// intoInput gives planning what it needs of the memory: the topology, the last
// resolutions and a copy of the choices.
func (m *placementMemory) intoInput(in *plan.Input) {
	in.Topology, in.Resolved, in.Choices = m.topo, m.resolved, maps.Clone(m.choices)
	now := m.clock.Now()
	for ck, until := range m.held {
		if now.After(until) {
			delete(m.held, ck) // its container never started, or the API's desire has it
			continue
		}
		if in.Held == nil {
			in.Held = map[plan.ChoiceKey]bool{}
		}
		in.Held[ck] = true
	}
}

// hold keeps choice ck until until, though its pod is not desired yet: it was made at a
// container's creation, which its start follows.
func (m *placementMemory) hold(ck plan.ChoiceKey, until time.Time) { m.held[ck] = until }

// adopt takes what a plan resolved: the resolutions, and the choices when they changed,
// which are saved at once (before the plan's SETs act on them).
func (m *placementMemory) adopt(pl plan.Plan) {
	if !pl.Resolved {
		return
	}
	m.resolved = pl.Resolutions
	if !pl.ChoicesChanged {
		return
	}
	m.choices = pl.Choices
	if m.choicesPath == "" {
		return
	}
	if err := saveChoices(m.choicesPath, m.choices); err != nil {
		m.log.Error(err, "Saving placement choices")
	}
}

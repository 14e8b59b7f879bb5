// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package nodeagent

import (
	"slices"
	"time"

	"github.com/numapref/numapref/internal/nodeagent/desire"
	"github.com/numapref/numapref/internal/nodeagent/known"
	"github.com/numapref/numapref/internal/nodeagent/plan"
	"github.com/numapref/numapref/internal/numa"
)

// How this agent first placed a container (plan.Result.PlacedAt): judged at the first
// SET of it that is confirmed, kept while the container stays placed (pass after pass,
// whatever pass sets its tasks later), and forgotten when it is undone or forgotten (no
// longer desired, skipped, gone) or runs again under a new container ID, so that a
// container placed again is judged again.
const (
	// PlacedAtStart: by PlaceAtStart (NRI's StartContainer: the start lane, or a start
	// pass), or by any pass while PlaceAtStart places it, before the container's first
	// instruction.
	PlacedAtStart = "Start"
	// PlacedAtAfterStart: by any other pass (the API's pod status, a fork event, a
	// rescan), after the container started.
	PlacedAtAfterStart = "AfterStart"
	// PlacedBeforeRestart: the container had a ledger entry when the engine started: an
	// earlier run of the agent placed it, and how is not known.
	PlacedBeforeRestart = "BeforeAgentStart"
)

// placedBeforeRestart is the placedAt of an engine whose ledger, at its start, is l.
func placedBeforeRestart(l known.View) map[desire.ContainerKey]string {
	placed := make(map[desire.ContainerKey]string, l.Len())
	for key := range l.Keys() {
		placed[key] = PlacedBeforeRestart
	}
	return placed
}

// notePlaced judges how container key was first placed when pass p confirmed the SETs
// confirmed in it, unless it was placed already, and observes the time from its start.
func (e *Engine) notePlaced(p *pass, key desire.ContainerKey, confirmed []issuedSet) {
	if len(confirmed) == 0 || e.placements.placed(key) != "" {
		return
	}
	starts := make([]uint64, len(confirmed))
	for i, s := range confirmed {
		starts[i] = s.task.StartTime
	}
	e.judge(p.kind, key, p.kind == passStart || e.desires.placing(key), starts)
}

// judge judges how container key was first placed, by a pass of kind (at its start when
// atStart) that set tasks started at starts, unless it was placed already, and observes
// the time from its start.
func (e *Engine) judge(kind passKind, key desire.ContainerKey, atStart bool, starts []uint64) {
	switch at, d, observe := e.placements.judgePlaced(key, atStart, starts); at {
	case PlacedAtStart:
		e.cfg.Metrics.reportStartToPlaced(PlacedAtStart, 0) // set before its first instruction
	case PlacedAtAfterStart:
		e.cfg.Log.V(1).Info("Placed after its start", "container", key.String(), "pass", kind.String(), "tasks", len(starts))
		if observe {
			e.cfg.Metrics.reportStartToPlaced(PlacedAtAfterStart, d)
		}
	}
}

// judgePlaced notes how container key was first placed, by SETs of tasks that started at
// starts (ticks since boot), unless it was placed already (then at is ""): at its start,
// when atStart, else after it. observe says d is the time from the container's start to
// now, to be observed.
func (m *placementMemory) judgePlaced(key desire.ContainerKey, atStart bool, starts []uint64) (at string, d time.Duration, observe bool) {
	m.placedMu.Lock()
	defer m.placedMu.Unlock()
	if m.placedAt[key] != "" {
		return "", 0, false
	}
	if atStart {
		m.placedAt[key] = PlacedAtStart
		return PlacedAtStart, 0, true
	}
	m.placedAt[key] = PlacedAtAfterStart
	d, observe = m.sinceStart(starts)
	return PlacedAtAfterStart, d, observe
}

// sinceStart is the time from the start of the container whose SETs' tasks started at
// starts, the earliest of them, to now, both on CLOCK_BOOTTIME. ok is false when the
// clock cannot be read, or the container started before the engine (an agent restarted
// among running containers would observe how long they ran, not how soon it placed them).
func (m *placementMemory) sinceStart(starts []uint64) (time.Duration, bool) {
	startNs := slices.Min(starts) * uint64(time.Second/numa.TicksPerSecond)
	now, ok := m.boottime()
	if !ok || !m.bootAtStartOK || startNs < m.bootAtStart {
		return 0, false
	}
	return time.Duration(max(now, startNs) - startNs), true
}

// forgetPlaced forgets how container key was placed: it is undone, or runs again under a
// new container ID.
func (m *placementMemory) forgetPlaced(key desire.ContainerKey) {
	m.placedMu.Lock()
	defer m.placedMu.Unlock()
	delete(m.placedAt, key)
}

// placed is how container key was first placed ("" not yet).
func (m *placementMemory) placed(key desire.ContainerKey) string {
	m.placedMu.Lock()
	defer m.placedMu.Unlock()
	return m.placedAt[key]
}

// publishPlaced copies into the results of pass p how each container it planned was
// placed.
func (e *Engine) publishPlaced(p *pass, pl plan.Plan) {
	for _, cp := range pl.Containers {
		r := p.results[cp.Key]
		r.PlacedAt = e.placements.placed(cp.Key)
		p.results[cp.Key] = r
	}
}

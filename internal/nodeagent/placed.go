package nodeagent

import (
	"time"

	"github.com/numapref/numapref/internal/numa"
)

// How this agent first placed a container (ContainerResult.PlacedAt): judged at the first
// SET of it that is confirmed, kept while the container stays placed (pass after pass,
// whatever pass sets its tasks later), and forgotten when it is undone or forgotten (no
// longer desired, skipped, gone) or runs again under a new container ID, so that a
// container placed again is judged again.
const (
	// PlacedAtStart: by a start pass (PlaceAtStart, NRI's StartContainer), or by any pass
	// while PlaceAtStart waits for the pass lock, before the container's first instruction.
	PlacedAtStart = "Start"
	// PlacedAtAfterStart: by any other pass (the API's pod status, a fork event, a
	// rescan), after the container started.
	PlacedAtAfterStart = "AfterStart"
	// PlacedBeforeRestart: the container had a ledger entry when the engine started: an
	// earlier run of the agent placed it, and how is not known.
	PlacedBeforeRestart = "BeforeAgentStart"
)

// placedBeforeRestart is the placedAt of an engine whose ledger, at its start, is l.
func placedBeforeRestart(l ledger) map[ContainerKey]string {
	placed := make(map[ContainerKey]string, len(l))
	for key := range l {
		placed[key] = PlacedBeforeRestart
	}
	return placed
}

// notePlaced judges how container key was first placed when pass p confirmed the SETs
// confirmed in it, unless it was placed already, and observes the time from its start.
func (e *Engine) notePlaced(p *pass, key ContainerKey, confirmed []issuedSet) {
	if len(confirmed) == 0 || e.placedAt[key] != "" {
		return
	}
	if p.atStart || e.placingAtStart(key) {
		e.placedAt[key] = PlacedAtStart
		e.cfg.Metrics.reportStartToPlaced(PlacedAtStart, 0) // set before its first instruction
		return
	}
	e.placedAt[key] = PlacedAtAfterStart
	if d, ok := e.sinceStart(confirmed); ok {
		e.cfg.Metrics.reportStartToPlaced(PlacedAtAfterStart, d)
	}
}

// sinceStart is the time from the start of the container whose SETs confirmed are, the
// earliest start of their tasks, to now, both on CLOCK_BOOTTIME. ok is false when the
// clock cannot be read, or the container started before the engine (an agent restarted
// among running containers would observe how long they ran, not how soon it placed them).
func (e *Engine) sinceStart(confirmed []issuedSet) (time.Duration, bool) {
	start := confirmed[0].task.StartTime
	for _, s := range confirmed[1:] {
		start = min(start, s.task.StartTime)
	}
	startNs := start * uint64(time.Second/numa.TicksPerSecond)
	now, ok := e.cfg.Boottime()
	if !ok || !e.bootAtStartOK || startNs < e.bootAtStart {
		return 0, false
	}
	return time.Duration(max(now, startNs) - startNs), true
}

// forgetPlaced forgets how container key was placed: it is undone, or runs again under a
// new container ID.
func (e *Engine) forgetPlaced(key ContainerKey) { delete(e.placedAt, key) }

// publishPlaced copies into the results of pass p how each container it planned was
// placed.
func (e *Engine) publishPlaced(p *pass, pl plan) {
	for _, cp := range pl.containers {
		r := p.results[cp.key]
		r.PlacedAt = e.placedAt[cp.key]
		p.results[cp.key] = r
	}
}

// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package nodeagent

import (
	"context"
	"time"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
	"github.com/numapref/numapref/internal/nodeagent/desire"
	"github.com/numapref/numapref/internal/numa"
)

// forkMark is the fork event a one-container pass runs for.
type forkMark struct {
	tid      int
	tgid     int       // the process of the task, as the event names it (0: unknown)
	kernelNs uint64    // the event's kernel timestamp (CLOCK_MONOTONIC), 0 if none
	arrival  time.Time // on the engine's clock
	// The stages of the passes for this event, on the engine's clock, for
	// numapref_fork_apply_stage_seconds: the first pass's start, and the start, the plan's
	// end and the write ahead's end of the latest (the one that set the task, if any).
	firstPass, passStart, planned, writtenAhead time.Time
}

// Values of the stage label of numapref_fork_apply_stage_seconds: the parts of the lag from
// a fork event to the SET of its task, in order (they add up to since=event's lag).
const (
	stageDeliver    = "deliver"    // the event's time in the socket, until the engine read it
	stageWait       = "wait"       // from its arrival to the start of its first pass (behind other passes)
	stageRetry      = "retry"      // from the first pass to the one that listed the task (DefaultForkRetryDelays)
	stagePlan       = "plan"       // that pass: listing the container, reading the new tasks
	stageWriteAhead = "writeahead" // the ledger's record, appended to its journal
	stageSet        = "set"        // the bracketed SET, until it returned
)

// forkStageNames are the stages in order, as forkMark.stages returns their durations.
var forkStageNames = []string{stageDeliver, stageWait, stageRetry, stagePlan, stageWriteAhead, stageSet}

// passStarted stamps a pass for the event that starts at start.
func (f *forkMark) passStarted(start time.Time) {
	if f.firstPass.IsZero() {
		f.firstPass = start
	}
	f.passStart, f.planned, f.writtenAhead = start, time.Time{}, time.Time{}
}

// stages are the parts of the lag of the event's task, set at set, in the order of the
// stage constants; ok is false when a stamp is missing. deliver is the lag since the
// kernel's timestamp less the rest (0 without a timestamp).
func (f *forkMark) stages(set setMark) (d [6]time.Duration, ok bool) {
	if f.firstPass.IsZero() || f.planned.IsZero() || f.writtenAhead.IsZero() {
		return d, false
	}
	d[1] = f.firstPass.Sub(f.arrival)
	d[2] = f.passStart.Sub(f.firstPass)
	d[3] = f.planned.Sub(f.passStart)
	d[4] = f.writtenAhead.Sub(f.planned)
	d[5] = set.at.Sub(f.writtenAhead)
	if f.kernelNs != 0 && set.mono >= f.kernelNs {
		d[0] = max(0, time.Duration(set.mono-f.kernelNs)-set.at.Sub(f.arrival))
	}
	return d, true
}

// setMark is when a SET returned, on CLOCK_MONOTONIC (0 if unreadable) and on the
// engine's clock.
type setMark struct {
	mono uint64
	at   time.Time
}

// forkReader is the proc connector's socket as the engine reads it (numa.ProcConn).
type forkReader interface {
	// Read returns the events queued, waiting for one; idle is called when it finds the
	// socket empty (numa.ProcConn.Read).
	Read(idle func(now int64)) ([]numa.ProcEvent, error)
	// StopReading makes the Read that waits, and every later one, fail.
	StopReading() error
}

// readForks reads the fork events of ForkReader until ctx ends, and handles each on this
// goroutine as it is read: the fork's pass runs straight from the socket (it takes the
// pass lock as every pass does). While the events read are handled, the forks count as
// waiting (markForks); the socket found empty, they no longer do.
func (e *Engine) readForks(ctx context.Context, done chan<- struct{}) {
	defer close(done)
	idle := func(int64) { e.forks.reading.Store(false) }
	for {
		events, err := e.cfg.ForkReader.Read(idle)
		if err != nil {
			if ctx.Err() == nil {
				e.cfg.Log.Error(err, "Reading fork events; new processes are caught by rescans only", "rescanInterval", e.cfg.RescanInterval)
			}
			return
		}
		e.forks.reading.Store(true)
		for _, ev := range events {
			e.onProcEvent(ev)
		}
	}
}

// onProcEvent handles one proc connector event: a fork runs a pass for the container of
// the new task's process (or of its creator), a lost event a full pass.
func (e *Engine) onProcEvent(ev numa.ProcEvent) {
	arrival := e.cfg.Clock.Now()
	if e.desires.draining.Load() {
		return // places nothing
	}
	if ev.Kind == numa.ProcEventLost {
		// The socket overflowed: any fork may be among the lost events, a reused tid too.
		e.forks.lost.Store(true)
		e.Pass()
		return
	}
	if ev.Kind != numa.ProcEventFork {
		return
	}
	fork := &forkMark{tid: ev.ChildTID, tgid: ev.ChildTGID, kernelNs: ev.TimestampNs, arrival: arrival}
	e.passMu.Lock()
	e.takeLaneNotes(nil, nil) // a container placed at its start: its init's forks find it
	key, ok := e.forks.containerOf(ev)
	if set, done := e.forks.takeSet(ev.ChildTID); done {
		// An earlier event's pass listed and set this task before its own event came.
		e.cfg.Metrics.reportForkLag(fork, set, false)
	}
	if !ok {
		e.forks.armMark() // the filter passed it for nothing: a young process's
	}
	e.passMu.Unlock()
	if ok {
		e.forkPass(key, fork)
		e.retryUnlisted(key, fork, 0)
	}
}

// DefaultForkRetryDelays are the looks a fork pass takes again when it did not list the new task.
// The kernel sends the fork event just before it moves the child into its cgroup
// (copy_process: proc_fork_connector, then cgroup_post_fork), so a pass in that gap sees
// the child in its parent's old cgroup or the root (how often: BENCHMARKS.md). After the
// last look the rescan catches it.
var DefaultForkRetryDelays = []time.Duration{time.Millisecond, 10 * time.Millisecond}

// forkRetry is a one-container pass to run again for a fork event.
type forkRetry struct {
	key     desire.ContainerKey
	fork    *forkMark
	attempt int
}

// retryUnlisted schedules look number attempt for the fork's task unless the last pass
// listed it or the looks ran out.
func (e *Engine) retryUnlisted(key desire.ContainerKey, fork *forkMark, attempt int) {
	if attempt >= len(e.forks.delays) || e.listed(key, fork.tid) {
		return
	}
	e.forks.retryAfter(key, fork, attempt)
}

// listed reports whether the container's last listing holds the task.
func (e *Engine) listed(key desire.ContainerKey, tid int) bool {
	e.passMu.Lock()
	defer e.passMu.Unlock()
	return e.forks.lists(key, tid)
}

// trusted lists, for a fork pass, the tasks the container's previous pass listed and
// applied without a failure: the fork concerns new tasks, so those are not read again (a
// GET per task, most of a fork pass's cost on the emulator); the next full pass checks
// every task. A container whose desire or outcome changed trusts nothing.
func (e *Engine) trusted(key desire.ContainerKey, d desire.Desire, fork *forkMark) map[int]bool {
	prev, ok := e.published.result(key)
	if !ok || prev.Desire != d || prev.Reason != numav1.ReasonApplied || len(prev.Failed) > 0 {
		return nil
	}
	return e.forks.trust(key, fork.tid)
}

// markSet is the setMark of a SET that just returned.
func (e *Engine) markSet() setMark {
	set := setMark{at: e.cfg.Clock.Now()}
	set.mono, _ = e.cfg.Monotonic()
	return set
}

// noteForkSet reports the fork-to-SET lag of tid, set by the pass for fork's event (the
// SET returned at set): now when the event named tid, else when tid's own event comes.
func (e *Engine) noteForkSet(fork *forkMark, tid int, set setMark) {
	if tid == fork.tid {
		e.cfg.Metrics.reportForkLag(fork, set, true)
		if e.cfg.hooks.forkSet != nil {
			var lag time.Duration
			if fork.kernelNs != 0 && set.mono >= fork.kernelNs {
				lag = time.Duration(set.mono - fork.kernelNs)
			}
			stages, ok := fork.stages(set)
			e.cfg.hooks.forkSet(lag, stages, ok)
		}
		return
	}
	e.forks.noteSet(tid, set)
}

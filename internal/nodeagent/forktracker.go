// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package nodeagent

import (
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/utils/clock"

	"github.com/numapref/numapref/internal/nodeagent/desire"
	"github.com/numapref/numapref/internal/nodeagent/plan"
	"github.com/numapref/numapref/internal/numa"
)

// forkTracker follows the processes the passes listed, so that a fork event finds its
// container: the tgids and listings of the last passes, the tasks fork passes set before
// their own events came, whether events were lost, the looks again for a child not yet in
// its cgroup, and the kernel's filter of fork events (forkfilter.go). The engine's passMu
// guards it, but for lost and its channels.
type forkTracker struct {
	// tgids maps each process to its container, from the last full pass's listing and
	// the one-container passes since; listing is each container's last listing.
	tgids   map[int]desire.ContainerKey
	listing map[desire.ContainerKey]plan.Listing
	// sets holds when fork passes set tasks other than the one their event named: tasks
	// whose own fork event is still queued. Cleared by full passes.
	sets map[int]setMark
	// lost is set when fork events were lost since the last full pass (verifyStarts).
	lost atomic.Bool
	// reading is set while the fork events read from the socket are handled (readForks).
	reading atomic.Bool

	// retries are the fork passes to run again (retryUnlisted), after delays.
	retries chan forkRetry
	delays  []time.Duration
	// markDue says a reading for the filter's mark is due (armMark).
	markDue chan struct{}
	watch   forkWatch
	filter  forkFilterer // nil: no filter
	// events is the queue of fork events, whose length says whether one waits.
	events   <-chan numa.ProcEvent
	procRoot string
	clock    clock.WithTickerAndDelayedExecution
	log      logr.Logger
}

func newForkTracker(cfg EngineConfig) *forkTracker {
	return &forkTracker{
		tgids: map[int]desire.ContainerKey{}, listing: map[desire.ContainerKey]plan.Listing{}, sets: map[int]setMark{},
		retries: make(chan forkRetry, 64), delays: cfg.ForkRetryDelays, markDue: make(chan struct{}, 1),
		filter: cfg.ForkFilter, events: cfg.ProcEvents, procRoot: cfg.ProcRoot, clock: cfg.Clock, log: cfg.Log,
	}
}

// containerOf is the container of the task ev forked: a new thread's event names its
// process as child TGID (and the process's parent as parent: threads share real_parent);
// a new process's names its creator as parent.
func (f *forkTracker) containerOf(ev numa.ProcEvent) (desire.ContainerKey, bool) {
	key, ok := f.tgids[ev.ChildTGID]
	if !ok {
		key, ok = f.tgids[ev.ParentTGID]
	}
	return key, ok
}

// noteListing takes a pass's listings: a full pass's replace the last ones, a
// one-container pass's (listing, with the others unchanged) add its processes.
func (f *forkTracker) noteListing(full bool, tgids map[int]desire.ContainerKey, listing map[desire.ContainerKey]plan.Listing) {
	if full {
		f.tgids = tgids
		f.watch.dirty = true
	} else {
		for tgid, key := range tgids {
			f.tgids[tgid] = key
			f.watch.dirty = f.watch.dirty || !f.watch.passes(tgid)
		}
	}
	f.listing = listing
}

// lists says whether the container's last listing holds the task.
func (f *forkTracker) lists(key desire.ContainerKey, tid int) bool {
	for _, t := range f.listing[key].Tasks {
		if t.TID == tid {
			return true
		}
	}
	return false
}

// trust is the set of tasks of the container's last listing but tid, the task of a fork
// event: it is new even when its tid was listed before (a recycled pid).
func (f *forkTracker) trust(key desire.ContainerKey, tid int) map[int]bool {
	tasks := f.listing[key].Tasks
	trust := make(map[int]bool, len(tasks))
	for _, t := range tasks {
		trust[t.TID] = true
	}
	delete(trust, tid)
	return trust
}

// noteSet notes that a fork pass set tid, at set, before tid's own fork event came.
func (f *forkTracker) noteSet(tid int, set setMark) { f.sets[tid] = set }

// takeSet is when a fork pass set tid before its own event came, if one did; it forgets it.
func (f *forkTracker) takeSet(tid int) (setMark, bool) {
	set, ok := f.sets[tid]
	if ok {
		delete(f.sets, tid)
	}
	return set, ok
}

// clearSets forgets the sets of fork passes: a full pass sets every task.
func (f *forkTracker) clearSets() { clear(f.sets) }

// retryAfter schedules look number attempt+1 for fork's task in container key, unless
// the looks ran out. The look runs on the apply loop (Start), so it ends with it.
func (f *forkTracker) retryAfter(key desire.ContainerKey, fork *forkMark, attempt int) {
	f.clock.AfterFunc(f.delays[attempt], func() {
		select {
		case f.retries <- forkRetry{key: key, fork: fork, attempt: attempt + 1}:
		default: // a burst filled the queue: the rescan catches the rest
		}
	})
}

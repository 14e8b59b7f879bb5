// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package nodeagent

import (
	"maps"
	"slices"
	"time"

	"github.com/numapref/numapref/internal/numa"
)

// forkFilterer narrows the fork events the kernel delivers (numa.ProcEvents).
type forkFilterer interface {
	FilterForks(numa.ForkFilter) error
}

// forkMarkEvery is how long after a fork the filter passed for nothing the engine reads
// the last pid again for the filter's mark, when the last reading is older than
// forkMarkMax; while passed forks keep coming, each reading waits twice as long as the
// one before, up to forkMarkMax. A reading that moves the mark attaches a new filter to
// the socket (the kernel checks and copies the program): on a host whose young processes
// fork all the time (a build: make's shells fork compilers within milliseconds of their
// birth) readings every 100 ms cost a quarter of the idle agent's CPU, for forks that pass
// however fresh the mark is. A new process that forks a lot (a forking server, a storm)
// is behind the mark after two readings: 0.3 s on a host otherwise quiet, up to 2 s on one
// whose young processes keep forking.
const (
	forkMarkEvery = 100 * time.Millisecond
	forkMarkMax   = time.Second
)

// forkWatch keeps the kernel's filter of fork events in step with the listings, so that an
// unrelated fork does not wake the agent. onProcEvent acts on a fork whose creator is a
// listed process (forkTracker.tgids); the filter passes those, and every fork of a process
// born after the mark: a child of a selected process that no pass has listed yet (its own
// fork event still on its way) may fork in turn. The mark is the last pid as read at the
// reading before the last one. A reading is taken after a fork the filter passed for
// nothing (a young process's; forkMarkEvery, backing off to forkMarkMax), so the mark
// follows the pids while young processes fork, and an idle host costs no reading. It moves
// only when no fork event waits, so every process born by then in a selected container had
// its fork event handled and its fork pass list it, or a full pass listed it (a child the
// fork pass's looks missed waits for the rescan, as its own forks always did). When pids
// wrap around, or the last pid cannot be read, every fork passes until two readings made a
// mark again.
type forkWatch struct {
	marks    [2]int // the last pid at the last two readings, older first
	set      numa.ForkFilter
	attached bool // set is the socket's filter
	// dirty says the listings or the mark changed since the filter was last judged in a
	// way set may not cover (filterForks); a one-container pass's new process that set
	// passes already (a child born after the mark) leaves it clean, and costs no judging.
	dirty bool
	armed bool // a reading is on its way
	// read is when the last reading was due, and wait how long it waited (armMark).
	read time.Time
	wait time.Duration
}

// armMark schedules a reading of the last pid, after a fork the filter passed for
// nothing.
func (f *forkTracker) armMark() {
	w := &f.watch
	if f.filter == nil || w.armed {
		return
	}
	w.armed = true
	if now := f.clock.Now(); w.read.IsZero() || now.Sub(w.read) > forkMarkMax {
		w.wait = forkMarkEvery
	} else {
		w.wait = min(max(2*w.wait, forkMarkEvery), forkMarkMax)
	}
	f.clock.AfterFunc(w.wait, func() { signal(f.markDue) })
}

// markForks takes a reading of the last pid and moves the filter's mark, unless fork
// events wait in the queue (then the next passed fork schedules another).
func (e *Engine) markForks() {
	e.passMu.Lock()
	defer e.passMu.Unlock()
	e.forks.mark(len(e.cfg.ProcEvents) > 0 || e.forks.reading.Load())
}

// mark takes a reading of the last pid for the filter's mark, unless events wait.
func (f *forkTracker) mark(eventsWait bool) {
	w := &f.watch
	w.armed, w.read = false, f.clock.Now()
	if eventsWait {
		return
	}
	w.dirty = true
	pid, _ := numa.ReadLastPid(f.procRoot) // 0: unknown
	if pid == 0 || pid < w.marks[1] {
		w.marks = [2]int{0, pid} // unknown, or wrapped around: no mark holds
	} else {
		w.marks = [2]int{w.marks[1], pid}
	}
	f.filterForks()
}

// maxStaleTGIDs is how many processes no longer listed an attached filter may still pass
// before it is replaced (keepFilter).
const maxStaleTGIDs = 64

// passes says whether the attached filter passes the forks of process tgid.
func (w *forkWatch) passes(tgid int) bool {
	if !w.attached || w.set.All() {
		return w.attached
	}
	if tgid > w.set.Above {
		return true
	}
	_, found := slices.BinarySearch(w.set.TGIDs, tgid)
	return found
}

// keepFilter says whether the attached filter can stay although the listings changed:
// with the same mark, it passes every fork the wanted one does, and at most maxStaleTGIDs
// processes that are gone. A forking server's new child is born after the mark, so it
// passes already; without this, its listing and its exit attached a new filter each, two
// program copies in the kernel per connection. A stale process's pid reused by an
// unrelated process passes a fork for nothing, which schedules a reading, which replaces
// the filter.
func keepFilter(attached, want numa.ForkFilter) bool {
	if attached.Equal(want) {
		return true
	}
	if attached.All() || want.All() || attached.Above != want.Above || !attached.Covers(want) {
		return false
	}
	stale := 0
	for _, t := range attached.TGIDs {
		if _, found := slices.BinarySearch(want.TGIDs, t); !found {
			stale++
		}
	}
	return stale <= maxStaleTGIDs
}

// filterForks gives the socket the filter of the current listings and mark, if it
// changed and the attached one does not do (keepFilter).
func (f *forkTracker) filterForks() {
	if f.filter == nil {
		return
	}
	w := &f.watch
	if w.attached && !w.dirty {
		return
	}
	w.dirty = false
	want := numa.ForkFilter{Above: w.marks[0]}
	if want.All() || len(f.tgids) > numa.MaxFilterTGIDs {
		want = numa.ForkFilter{}
	} else {
		want.TGIDs = slices.Sorted(maps.Keys(f.tgids))
	}
	if w.attached && keepFilter(w.set, want) {
		return
	}
	err := f.filter.FilterForks(want)
	if err != nil {
		f.log.Error(err, "Filtering fork events in the kernel; every fork is delivered", "processes", len(want.TGIDs))
		want = numa.ForkFilter{}
		err = f.filter.FilterForks(want)
	}
	w.set, w.attached = want, err == nil
}

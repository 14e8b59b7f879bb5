// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package migration

import (
	"errors"
	"fmt"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/numapref/numapref/internal/numa"
	"github.com/numapref/numapref/internal/numa/migrate"
)

var t0 = time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)

// fakeProc is a process of n pages, all on a source node at first; the first stuck of
// them never move.
type fakeProc struct {
	n, stuck int
	home     []bool
	errs     []error // returned by the next calls, one each
}

// fakeMover moves the pages of fakeProcs; every call takes took of the simulation's time.
type fakeMover struct {
	procs map[int]*fakeProc
	calls []work
	took  time.Duration
}

func newFakeMover(sizes map[int]int) *fakeMover {
	m := &fakeMover{procs: map[int]*fakeProc{}}
	for pid, n := range sizes {
		m.procs[pid] = &fakeProc{n: n, home: make([]bool, n)}
	}
	return m
}

func (m *fakeMover) Move(pid int, from numa.NodeMask, to int, cursor uint64, budget int) (migrate.Step, error) {
	m.calls = append(m.calls, work{pid: pid, from: from, home: to, cursor: cursor, budget: budget})
	p, ok := m.procs[pid]
	if !ok {
		return migrate.Step{}, &migrate.Error{Op: "move_pages", Pid: pid, Errno: syscall.ESRCH, Kind: migrate.ErrGone}
	}
	if len(p.errs) > 0 {
		err := p.errs[0]
		p.errs = p.errs[1:]
		return migrate.Step{}, err
	}
	var s migrate.Step
	i := int(cursor)
	for ; i < p.n && s.Found < budget; i++ {
		if p.home[i] {
			continue
		}
		s.Found++
		if i < p.stuck {
			s.Failed++
		} else {
			p.home[i] = true
			s.Moved++
		}
	}
	s.Scanned, s.Next, s.Done = i-int(cursor), uint64(i), i == p.n
	return s, nil
}

// event is one step's outcome in a simulation.
type event struct {
	at    time.Duration
	key   string
	moved int
}

// sim runs a scheduler over a fakeMover on simulated time: each step at the time next
// allows, waits as long as next says.
type sim struct {
	s       *sched
	m       *fakeMover
	now     time.Time
	events  []event
	moved   int
	failed  int
	endings map[string][]Reason
}

func newSim(o Options, m *fakeMover) *sim {
	return &sim{s: newSched(o, t0), m: m, now: t0, endings: map[string][]Reason{}}
}

func (x *sim) submit(r Request)  { x.tally(r.Key, x.s.submit(r)) }
func (x *sim) cancel(key string) { x.tally(key, x.s.cancel(key)) }

func (x *sim) tally(key string, rep report) {
	x.moved += rep.moved
	x.failed += rep.failed
	x.endings[key] = append(x.endings[key], rep.ended...)
}

// run steps until nothing is left to do or until limit of simulated time has passed.
func (x *sim) run(limit time.Duration) {
	for x.now.Sub(t0) <= limit {
		w, wait, ok := x.s.next(x.now)
		if !ok {
			if wait == 0 {
				return
			}
			x.now = x.now.Add(wait)
			continue
		}
		step, err := x.m.Move(w.pid, w.from, w.home, w.cursor, w.budget)
		x.now = x.now.Add(x.m.took)
		x.tally(w.key, x.s.finish(w, step, err, x.now, x.m.took))
		x.events = append(x.events, event{x.now.Sub(t0), w.key, step.Moved})
	}
}

func (x *sim) status(t *testing.T, key string) Status {
	t.Helper()
	st, ok := x.s.status(key)
	if !ok {
		t.Fatalf("no status for %s", key)
	}
	return st
}

func req(key string, home int, pids ...int) Request {
	return Request{Key: key, PIDs: pids, Home: home, From: numa.NewNodeMask(0, 1)}
}

// The pages moved by any time stay within the bucket: its burst plus the rate since.
func TestRateBoundsThePagesMoved(t *testing.T) {
	m := newFakeMover(map[int]int{10: 20000})
	x := newSim(Options{Rate: 1000, Burst: 1000, Step: 250}, m)
	x.submit(req("a", 1, 10))
	x.run(time.Hour)
	total := 0
	for _, e := range x.events {
		total += e.moved
		if limit := 1000 + int(e.at.Seconds()*1000); total > limit {
			t.Fatalf("%d pages moved by %s; the bound is %d", total, e.at, limit)
		}
	}
	if total != 20000 || x.moved != 20000 {
		t.Fatalf("moved %d (metrics %d) of 20000", total, x.moved)
	}
	if end := x.events[len(x.events)-1].at; end < 18*time.Second || end > 21*time.Second {
		t.Errorf("20000 pages at 1000/s with a burst of 1000 took %s; want about 19 s", end)
	}
	if got := x.status(t, "a"); got.State != StateEnded || got.Reason != ReasonMoved || got.Moved != 20000 {
		t.Errorf("status = %+v; want ended Moved with 20000 pages", got)
	}
	if want := []Reason{ReasonMoved}; !slices.Equal(x.endings["a"], want) {
		t.Errorf("endings = %v; want %v", x.endings["a"], want)
	}
}

// A container of many pages takes many turns; one that comes after it, small, is done
// long before it, and so is each of its processes' turn in between.
func TestRoundRobinLetsSmallRequestsThrough(t *testing.T) {
	m := newFakeMover(map[int]int{1: 1_000_000, 2: 500, 3: 300})
	x := newSim(Options{Rate: 10000, Step: 1000}, m)
	x.submit(req("big", 1, 1))
	x.run(time.Second) // the big one is under way
	x.submit(req("small", 1, 2, 3))
	x.run(time.Hour)
	var bigDone, smallDone time.Duration
	for _, e := range x.events {
		switch e.key {
		case "big":
			bigDone = e.at
		case "small":
			smallDone = e.at
		}
	}
	if smallDone > 2*time.Second+500*time.Millisecond {
		t.Errorf("the small request ended at %s, after it came at 1 s; want within a few steps", smallDone)
	}
	if bigDone < 90*time.Second {
		t.Errorf("a million pages at 10000/s ended at %s; want about 100 s", bigDone)
	}
	for i := 1; i < len(m.calls); i++ {
		if m.calls[i].budget > 1000 {
			t.Fatalf("a step's budget was %d; the step bound is 1000", m.calls[i].budget)
		}
	}
	if st := x.status(t, "small"); st.Reason != ReasonMoved || st.Moved != 800 {
		t.Errorf("small: %+v; want Moved, 800 pages", st)
	}
}

// The same request again changes nothing, even once it has ended; one that asks
// otherwise replaces it and starts over.
func TestSubmitReplacesOnlyAChangedRequest(t *testing.T) {
	m := newFakeMover(map[int]int{1: 5000, 2: 100})
	x := newSim(Options{Rate: 1000, Step: 500}, m)
	x.submit(req("a", 1, 1))
	x.run(0) // one step
	x.submit(Request{Key: "a", PIDs: []int{1, 1}, Home: 1, From: numa.NewNodeMask(1, 0)})
	if st := x.status(t, "a"); st.Moved != 500 || len(x.endings["a"]) != 0 {
		t.Fatalf("the same request resubmitted: %+v, endings %v; want it kept", st, x.endings["a"])
	}
	x.submit(req("a", 1, 1, 2))
	if want := []Reason{ReasonReplaced}; !slices.Equal(x.endings["a"], want) {
		t.Fatalf("endings after a changed request = %v; want %v", x.endings["a"], want)
	}
	if st := x.status(t, "a"); st.Moved != 0 || st.State != StateQueued {
		t.Fatalf("the new request: %+v; want queued, counted from 0", st)
	}
	x.run(time.Hour)
	if st := x.status(t, "a"); st.Reason != ReasonMoved || st.Moved != 4600 {
		t.Errorf("the new request: %+v; want Moved, the 4600 pages left", st)
	}
	calls := len(m.calls)
	x.submit(req("a", 1, 1, 2))
	x.run(time.Hour)
	if len(m.calls) != calls || len(x.endings["a"]) != 2 {
		t.Errorf("the same request after it ended: %d more steps, endings %v; want none", len(m.calls)-calls, x.endings["a"])
	}
}

// A step in flight when its request is replaced or cancelled counts its pages, and
// changes nothing of the new request.
func TestAStaleStepCountsButChangesNothing(t *testing.T) {
	m := newFakeMover(map[int]int{1: 5000})
	x := newSim(Options{Rate: 1000, Step: 500}, m)
	x.submit(req("a", 1, 1))
	w, _, ok := x.s.next(x.now)
	if !ok {
		t.Fatal("no step")
	}
	step, err := m.Move(w.pid, w.from, w.home, w.cursor, w.budget)
	x.submit(req("a", 0, 1)) // a new home meanwhile
	x.tally("a", x.s.finish(w, step, err, x.now, 0))
	if x.moved != 500 {
		t.Errorf("metrics counted %d pages; want the stale step's 500", x.moved)
	}
	if st := x.status(t, "a"); st.Moved != 0 || st.State != StateQueued {
		t.Errorf("the new request after the stale step: %+v; want queued, nothing counted", st)
	}
	w, _, _ = x.s.next(x.now)
	if w.cursor != 0 || w.home != 0 {
		t.Errorf("the new request's first step: %+v; want it from the start, home 0", w)
	}
}

// Errors are tried again after a doubling wait; enough in a row end the request.
func TestErrorsBackOffThenFail(t *testing.T) {
	m := newFakeMover(map[int]int{1: 100})
	boom := errors.New("EBUSY-like")
	m.procs[1].errs = []error{boom, boom, boom, boom}
	x := newSim(Options{Rate: 1000, Step: 100, Backoff: time.Second, Attempts: 4}, m)
	x.submit(req("a", 1, 1))
	x.run(time.Hour)
	var at []time.Duration
	for _, e := range x.events {
		at = append(at, e.at)
	}
	if want := []time.Duration{0, time.Second, 3 * time.Second, 7 * time.Second}; !slices.Equal(at, want) {
		t.Errorf("tries at %v; want %v", at, want)
	}
	st := x.status(t, "a")
	if st.Reason != ReasonFailed || !errors.Is(st.LastError, boom) {
		t.Errorf("status = %+v; want Failed with the last error", st)
	}
	// One error fewer and the request moves.
	m = newFakeMover(map[int]int{1: 100})
	m.procs[1].errs = []error{boom, boom, boom}
	x = newSim(Options{Rate: 1000, Step: 100, Backoff: time.Second, Attempts: 4}, m)
	x.submit(req("a", 1, 1))
	x.run(time.Hour)
	if st := x.status(t, "a"); st.Reason != ReasonMoved || st.Moved != 100 {
		t.Errorf("after three errors: %+v; want Moved", st)
	}
}

// Pages that do not move are counted once per pass and tried again only after the long,
// doubling wait; the request ends after the last try.
func TestPagesThatStayAreNotRetriedInAStorm(t *testing.T) {
	m := newFakeMover(map[int]int{1: 1000})
	m.procs[1].stuck = 100
	x := newSim(Options{Rate: 1000, Step: 1000, StayedBackoff: 5 * time.Minute, StayedRetries: 2}, m)
	x.submit(req("a", 1, 1))
	x.run(time.Minute)
	if len(m.calls) != 1 || x.failed != 100 || x.moved != 900 {
		t.Fatalf("after a minute: %d steps, %d failed, %d moved; want 1 step, 100 and 900", len(m.calls), x.failed, x.moved)
	}
	if st := x.status(t, "a"); st.State != StateWaiting || st.NextTry != t0.Add(5*time.Minute) {
		t.Fatalf("status = %+v; want waiting until 5 min", st)
	}
	x.run(24 * time.Hour)
	var at []time.Duration
	for _, e := range x.events {
		at = append(at, e.at)
	}
	if want := []time.Duration{0, 5 * time.Minute, 15 * time.Minute}; !slices.Equal(at, want) {
		t.Errorf("passes at %v; want %v", at, want)
	}
	if x.failed != 300 || x.moved != 900 {
		t.Errorf("counted %d failed, %d moved; want 300 (100 a pass) and 900", x.failed, x.moved)
	}
	if st := x.status(t, "a"); st.Reason != ReasonPagesStayed {
		t.Errorf("status = %+v; want PagesStayed", st)
	}
	// A changed request tries at once.
	x.submit(req("a", 0, 1))
	x.run(25 * time.Hour)
	if at := x.events[len(x.events)-1].at; at > 24*time.Hour+time.Second {
		t.Errorf("a changed request's first step at %s; want at once", at)
	}
}

func TestRefusalsEndAtOnce(t *testing.T) {
	tests := map[string]struct {
		err  error
		want Reason
	}{
		"permission": {&migrate.Error{Op: "move_pages", Pid: 1, Errno: syscall.EPERM, Kind: migrate.ErrPermission}, ReasonPermissionDenied},
		"pinned":     {&migrate.Error{Op: "move_pages", Pid: 1, Errno: syscall.EACCES, Kind: migrate.ErrPinned}, ReasonPinned},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			m := newFakeMover(map[int]int{1: 100})
			m.procs[1].errs = []error{tc.err}
			x := newSim(Options{Rate: 1000}, m)
			x.submit(req("a", 1, 1))
			x.run(time.Hour)
			if st := x.status(t, "a"); len(m.calls) != 1 || st.Reason != tc.want {
				t.Errorf("%d steps, status %+v; want one step, %s", len(m.calls), st, tc.want)
			}
		})
	}
}

// A gone process is skipped; when every one is gone the request ends so.
func TestGoneProcesses(t *testing.T) {
	m := newFakeMover(map[int]int{2: 100})
	x := newSim(Options{Rate: 1000}, m)
	x.submit(req("some", 1, 1, 2, 3))
	x.submit(req("all", 1, 7, 8))
	x.run(time.Hour)
	if st := x.status(t, "some"); st.Reason != ReasonMoved || st.Moved != 100 {
		t.Errorf("some gone: %+v; want Moved, 100", st)
	}
	if st := x.status(t, "all"); st.Reason != ReasonGone {
		t.Errorf("all gone: %+v; want ProcessesGone", st)
	}
}

func TestCancel(t *testing.T) {
	m := newFakeMover(map[int]int{1: 10000})
	x := newSim(Options{Rate: 1000, Step: 500}, m)
	x.submit(req("a", 1, 1))
	x.run(0)
	x.cancel("a")
	x.run(time.Hour)
	if len(m.calls) != 1 || !slices.Equal(x.endings["a"], []Reason{ReasonCancelled}) {
		t.Errorf("%d steps, endings %v; want 1 and Cancelled", len(m.calls), x.endings["a"])
	}
	if _, ok := x.s.status("a"); ok {
		t.Error("a cancelled key keeps a status")
	}
	x.cancel("a") // twice: nothing
	if len(x.endings["a"]) != 1 {
		t.Errorf("endings after a second cancel = %v", x.endings["a"])
	}
}

// Time in steps is bounded: after a step of d the next waits d*(1/MaxBusy-1).
func TestMaxBusySpacesTheSteps(t *testing.T) {
	m := newFakeMover(map[int]int{1: 10000})
	m.took = 100 * time.Millisecond
	x := newSim(Options{Rate: 1e9, Step: 1000, MaxBusy: 0.2}, m)
	x.submit(req("a", 1, 1))
	x.run(time.Hour)
	for i := 1; i < len(x.events); i++ {
		if gap := x.events[i].at - x.events[i-1].at; gap != 500*time.Millisecond {
			t.Fatalf("step %d came %s after the one before; want 100 ms running and 400 ms quiet", i, gap)
		}
	}
	if len(x.events) != 10 {
		t.Errorf("%d steps; want 10", len(x.events))
	}
}

// Nothing to move is done at once; the home is never a source.
func TestNothingToMove(t *testing.T) {
	m := newFakeMover(nil)
	x := newSim(Options{Rate: 1000}, m)
	x.submit(Request{Key: "a", PIDs: []int{1}, Home: 1, From: numa.NewNodeMask(1)})
	x.submit(Request{Key: "b", Home: 1, From: numa.NewNodeMask(0)})
	x.run(time.Hour)
	for _, key := range []string{"a", "b"} {
		if st := x.status(t, key); st.Reason != ReasonMoved {
			t.Errorf("%s: %+v; want Moved", key, st)
		}
	}
	if len(m.calls) != 0 {
		t.Errorf("%d steps; want none", len(m.calls))
	}
	x.submit(Request{Key: "c", PIDs: []int{5}, Home: 1, From: numa.NewNodeMask(0, 1)})
	m.procs[5] = &fakeProc{n: 1, home: make([]bool, 1)}
	x.run(time.Hour)
	if got := m.calls[0].from.String(); got != "0" {
		t.Errorf("the step's source nodes = %s; want 0, without the home", got)
	}
}

func ExampleRequest() {
	r := Request{Key: "default/web/app", PIDs: []int{42, 7, 42}, Home: 1, From: numa.NewNodeMask(0, 1, 2)}.normalized()
	fmt.Println(r.PIDs, r.From)
	// Output: [7 42] 0,2
}

// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package nodeagent

import (
	"sync/atomic"
	"testing"
	"time"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
	"github.com/numapref/numapref/internal/nodeagent/cgroups"
	"github.com/numapref/numapref/internal/nodeagent/desire"
)

// A Static container's start is placed while a full pass holds the pass lock (a long one:
// a container at its task share, a fork storm): the start lane waits for no pass. The full
// pass, which read its desire before the start, does not take the started container for
// an orphan, and the next pass knows it (its result, its listing for the forks of its
// init).
func TestStartWaitsForNoPass(t *testing.T) {
	h := newFakeHost(t)
	h.addTask(100, -1)
	e := h.engine(EngineConfig{})
	running := fakeDesire(1)
	e.SetDesired([]desire.Desire{running})
	e.Pass()

	// The next full pass stops in its first GET, holding the pass lock.
	var first atomic.Bool
	inPass, release := make(chan struct{}), make(chan struct{})
	h.onGet = func(int) {
		if first.CompareAndSwap(false, true) {
			close(inPass)
			<-release
		}
	}
	passDone := make(chan struct{})
	go func() { e.Pass(); close(passDone) }()
	<-inPass

	starting := fakeDesire(1)
	starting.PodUID, starting.Ref.PodUID, starting.Ref.ContainerID = "pod-b", "pod-b", "containerd://b"
	h.addTask(200, -1) // the fake host lists every task for every container
	answered := make(chan struct{})
	var r struct {
		ok  bool
		res string
		at  string
	}
	go func() {
		res, ok := e.PlaceAtStart(starting)
		r.ok, r.res, r.at = ok, res.Reason, res.PlacedAt
		close(answered)
	}()
	select {
	case <-answered:
	case <-time.After(10 * time.Second):
		close(release)
		t.Fatal("PlaceAtStart waited for the full pass that holds the pass lock")
	}
	if !r.ok || r.res != numav1.ReasonApplied || r.at != PlacedAtStart {
		t.Errorf("PlaceAtStart during a pass: ok %v, %s, placed at %q; want Applied at %q", r.ok, r.res, r.at, PlacedAtStart)
	}
	if v := h.value(200); v != 1 {
		t.Errorf("the starting container's task holds %d, want 1", v)
	}
	select {
	case <-passDone:
		t.Fatal("the full pass ended before it was released: the test proves nothing")
	default:
	}
	close(release)
	<-passDone
	if !e.ledger.View().Entry(starting.Key()).Exists() {
		t.Fatalf("the full pass that ran beside the start undid it")
	}
	if v := h.value(200); v != 1 {
		t.Errorf("after the full pass beside the start, its task holds %d, want 1", v)
	}
	if got := e.Results()[starting.Key()]; got.Reason != numav1.ReasonApplied {
		t.Errorf("the started container's result after the pass: %+v; want Applied", got)
	}
	e.passMu.Lock()
	e.takeLaneNotes(nil, nil)
	listed := e.forks.lists(starting.Key(), 200)
	e.passMu.Unlock()
	if !listed {
		t.Errorf("the fork tracker does not list the started container's task: its forks would find no container")
	}
}

// A start the lane places between a full pass's reading of the ledger and its reading of
// the desire is in that desire: the pass does not take it for an orphan to undo.
func TestStartBesideAPassIsNoOrphan(t *testing.T) {
	h := newFakeHost(t)
	h.addTask(100, -1)
	starting := fakeDesire(1)
	var e *Engine
	var placed atomic.Bool
	cfg := EngineConfig{}
	cfg.hooks.betweenReads = placeInFirstFullPass(t, &e, starting, &placed)
	e = h.engine(cfg)
	e.SetDesired(nil)
	e.Pass()
	if !placed.Load() {
		t.Fatal("no start was placed beside the pass: the test proves nothing")
	}
	if v := h.value(100); v != 1 {
		t.Errorf("the started container's task holds %d after the pass beside its start, want 1: undone as an orphan", v)
	}
	if !e.ledger.View().Entry(starting.Key()).Exists() {
		t.Errorf("the pass beside the start forgot its ledger entry")
	}
}

// The API's desire holds a container as not running until the kubelet reports its start.
// A full pass that read that desire plans to undo the container (nothing may stay set in
// a container that does not run); if the start lane placed it meanwhile, the pass must not
// undo what the lane set (the pass never knew it), nor publish its older result over the
// lane's.
func TestStartBesideAPassThatReadItNotRunning(t *testing.T) {
	h := newFakeHost(t)
	h.addTask(100, -1)
	starting := fakeDesire(1)
	notRunning := starting
	notRunning.Ref = cgroups.ContainerRef{}
	notRunning.Refusal, notRunning.Message = numav1.ReasonContainerNotRunning, "container is not running"
	var e *Engine
	var placed atomic.Bool
	cfg := EngineConfig{}
	cfg.hooks.beforeApply = placeInFirstFullPass(t, &e, starting, &placed)
	e = h.engine(cfg)
	e.SetDesired([]desire.Desire{notRunning})
	e.Pass()
	if !placed.Load() {
		t.Fatal("no start was placed beside the pass: the test proves nothing")
	}
	if v := h.value(100); v != 1 {
		t.Errorf("the started container's task holds %d after the pass beside its start, want 1: undone by a pass that read it as not running", v)
	}
	if !e.ledger.View().Entry(starting.Key()).Has(100) {
		t.Errorf("the pass beside the start forgot its ledger entry")
	}
	if r := e.Results()[starting.Key()]; r.Reason != numav1.ReasonApplied || r.PlacedAt != PlacedAtStart {
		t.Errorf("published result %s placed at %q, want Applied placed at %q: the pass's older result hid the lane's", r.Reason, r.PlacedAt, PlacedAtStart)
	}
}

// placeInFirstFullPass is a pass hook that places starting at its start, once, from inside
// the first full pass that runs it, and notes in placed that it did.
func placeInFirstFullPass(t *testing.T, e **Engine, starting desire.Desire, placed *atomic.Bool) func(passKind) {
	return func(kind passKind) {
		if kind == passFull && placed.CompareAndSwap(false, true) {
			if r, ok := (*e).PlaceAtStart(starting); !ok || r.Reason != numav1.ReasonApplied {
				t.Errorf("PlaceAtStart = %+v, %v; want Applied", r, ok)
			}
		}
	}
}

// A thread takes its creator's value when it is made: one the init makes between the lane's
// listing and its creator's SET holds none. The lane lists the container again after a
// round that set anything and sets what is new, so the runtime, which may exec the
// container's program on any thread of its init, starts it with its node.
func TestStartSetsTheThreadsMadeDuringItsSets(t *testing.T) {
	h := newFakeHost(t)
	h.addTask(100, -1)
	var made atomic.Bool
	cfg := EngineConfig{}
	cfg.hooks.beforeSet = func(int) {
		if made.CompareAndSwap(false, true) {
			h.addTask(101, -1) // made by 100 before 100's SET: -1, as in the kernel
		}
	}
	e := h.engine(cfg)
	e.SetDesired(nil)
	d := fakeDesire(1)
	r, ok := e.PlaceAtStart(d)
	if !made.Load() {
		t.Fatal("no thread was made during the lane's SETs: the test proves nothing")
	}
	if !ok || r.Reason != numav1.ReasonApplied || r.Tasks != 2 {
		t.Errorf("PlaceAtStart = %s with %d tasks, ok %v; want Applied with 2", r.Reason, r.Tasks, ok)
	}
	for _, tid := range []int{100, 101} {
		if v := h.value(tid); v != 1 {
			t.Errorf("task %d holds %d after the start, want 1", tid, v)
		}
		if !e.ledger.View().Entry(d.Key()).Has(tid) {
			t.Errorf("the ledger has no entry of task %d: undo would not find it", tid)
		}
	}
}

// An init that makes a thread at every SET does not keep the lane listing forever: it
// stops after laneRounds rounds, and the next pass sets what is left.
func TestStartLaneRoundsAreBounded(t *testing.T) {
	h := newFakeHost(t)
	h.addTask(100, -1)
	var next atomic.Int64
	next.Store(101)
	cfg := EngineConfig{}
	cfg.hooks.beforeSet = func(int) { h.addTask(int(next.Add(1)-1), -1) }
	e := h.engine(cfg)
	e.SetDesired(nil)
	r, ok := e.PlaceAtStart(fakeDesire(1))
	if !ok || r.Reason != numav1.ReasonApplied {
		t.Fatalf("PlaceAtStart = %+v, %v; want Applied", r, ok)
	}
	set := 0
	for tid, v := range h.snapshot() {
		if v == 1 {
			set++
		} else if tid < int(next.Load())-1 {
			t.Errorf("task %d holds %d: a round left it unset", tid, v)
		}
	}
	if set != laneRounds {
		t.Errorf("the lane set %d tasks, want one per round: %d", set, laneRounds)
	}
}

// A pass beside the lane may set the starting container's tasks first, and judge how it
// was placed only after the lane has answered the runtime: the lane, which finds every task
// at its node before the program runs, judges it placed at its start.
func TestStartFoundSetByAPassIsPlacedAtStart(t *testing.T) {
	h := newFakeHost(t)
	h.addTask(100, -1)
	d := fakeDesire(1)
	var first atomic.Bool
	inSet, release := make(chan struct{}), make(chan struct{})
	cfg := EngineConfig{}
	cfg.hooks.beforeSet = func(tid int) {
		if first.CompareAndSwap(false, true) {
			h.mu.Lock()
			h.values[tid] = 1 // the pass's SET, as far as the lane can see
			h.mu.Unlock()
			close(inSet)
			<-release
		}
	}
	e := h.engine(cfg)
	e.SetDesired([]desire.Desire{d})
	passDone := make(chan struct{})
	go func() { e.Pass(); close(passDone) }()
	<-inSet
	r, ok := e.PlaceAtStart(d)
	close(release)
	<-passDone
	if !ok || r.Reason != numav1.ReasonApplied || r.PlacedAt != PlacedAtStart {
		t.Errorf("PlaceAtStart beside a pass that set its task = %s, placed at %q, ok %v; want Applied at %q", r.Reason, r.PlacedAt, ok, PlacedAtStart)
	}
	if got := e.Results()[d.Key()].PlacedAt; got != PlacedAtStart {
		t.Errorf("after the pass, the container was placed at %q, want %q", got, PlacedAtStart)
	}
}

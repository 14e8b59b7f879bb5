// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package nodeagent

import (
	"sync/atomic"
	"testing"
	"time"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
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
	cfg.hooks.betweenReads = func(kind passKind) {
		if kind == passFull && placed.CompareAndSwap(false, true) {
			if r, ok := e.PlaceAtStart(starting); !ok || r.Reason != numav1.ReasonApplied {
				t.Errorf("PlaceAtStart = %+v, %v; want Applied", r, ok)
			}
		}
	}
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

// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build host && linux

package nodeagent

import (
	"math"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
	"github.com/numapref/numapref/internal/nodeagent/desire"
	"github.com/numapref/numapref/internal/numa"
	"github.com/numapref/numapref/internal/testutil/hostlab"
)

// TestEnginePlacesAtStart: a container placed at its start (PlaceAtStart) has its tasks
// set at once, by a start pass; its desire holds while the API does not report it
// running, the API's confirmation costs no SET, and a start the API never confirms is
// undone once StartGrace has passed. Its result says it was placed at its start, through
// the confirmation. Before the engine is synced it places nothing.
func TestEnginePlacesAtStart(t *testing.T) {
	el := newEngineLab(t)
	clk := clocktesting.NewFakeClock(time.Now())
	m := NewMetrics()
	e := el.engineWith(t, EngineConfig{Clock: clk, Metrics: m, StartGrace: time.Minute})

	confirmed, _, d := el.container(t, "confirmed", 0, 2)
	if _, ok := e.PlaceAtStart(d); ok {
		t.Fatal("an engine that has no desired state yet placed a container at its start")
	}
	if v := el.values(t, confirmed.Pid()); !allEqual(v, -1) {
		t.Fatalf("before the first desired state, tasks have %v; want -1", v)
	}

	// The API's first desired state: the new pod is not running yet, so it holds nothing.
	e.SetDesired(nil)
	r, ok := e.PlaceAtStart(d)
	if !ok || r.Reason != numav1.ReasonApplied || r.Tasks < 1 || r.PlacedAt != PlacedAtStart {
		t.Fatalf("PlaceAtStart = %+v, %v; want Applied with the container's tasks, placed at its start", r, ok)
	}
	// The init task is the one that matters at a start: its thread execs the program. (The
	// Go runtime of the lab's workload may add a thread while the pass runs.)
	if v := el.init(t, confirmed); v != 0 {
		t.Fatalf("after PlaceAtStart, the init task has %d; want node 0", v)
	}
	if got := passStats(t, m, "start").count; got != 1 {
		t.Errorf("start passes observed = %d, want 1", got)
	}
	if got, want := startToPlaced(t, m, PlacedAtStart), (histStats{count: 1}); got != want {
		t.Errorf("start to placed, Start = %+v, want %+v", got, want)
	}

	// The API still knows nothing of the container, within the grace: a rescan keeps it.
	e.SetDesired(nil)
	clk.Step(30 * time.Second)
	if v := el.settle(t, e, confirmed.Pid()); !allEqual(v, 0) {
		t.Fatalf("a rescan within the grace undid the start: %v", v)
	}
	// The API reports it running: the same desire, no SET.
	e.SetDesired([]desire.Desire{d})
	before := el.emu.Stats()
	e.Pass()
	if after := el.emu.Stats(); after != before {
		t.Errorf("the API's confirmation changed the kernel state: %+v -> %+v", before, after)
	}
	if r := e.Results()[d.Key()]; r.Reason != numav1.ReasonApplied || r.PlacedAt != PlacedAtStart {
		t.Errorf("after confirmation: %+v; want Applied, placed at its start", r)
	}

	// A start the API never confirms (its pod gone from the API, or no longer selected):
	// undone by the first pass after the grace, even with no new desired state.
	unconfirmed, _, u := el.container(t, "unconfirmed", 0, 2)
	if r, ok := e.PlaceAtStart(u); !ok || r.Reason != numav1.ReasonApplied {
		t.Fatalf("PlaceAtStart = %+v, %v", r, ok)
	}
	clk.Step(59 * time.Second)
	if v := el.settle(t, e, unconfirmed.Pid()); !allEqual(v, 0) {
		t.Fatalf("undone before the grace: %v", v)
	}
	clk.Step(time.Second)
	e.Pass()
	if v := el.values(t, unconfirmed.Pid()); !allEqual(v, -1) {
		t.Errorf("a start the API never confirmed is still placed after the grace: %v", v)
	}
	if v := el.values(t, confirmed.Pid()); !allEqual(v, 0) {
		t.Errorf("the confirmed container lost its node: %v", v)
	}

	// Draining: nothing is placed at a start any more.
	late, _, l := el.container(t, "late", 0, 1)
	e.Drain()
	if _, ok := e.PlaceAtStart(l); ok {
		t.Error("a draining engine placed a container at its start")
	}
	if v := el.values(t, late.Pid(), confirmed.Pid()); !allEqual(v, -1) {
		t.Errorf("after Drain: %v", v)
	}
}

// TestEngineKeepsStartsThroughAnOutage: a container placed at its start while the API
// server does not answer keeps its node however long the outage lasts, through rescans and
// the stale cache's desired states; once the API answers again it has a whole grace for
// the kubelet's status, and only then lapses if the API never confirms it.
func TestEngineKeepsStartsThroughAnOutage(t *testing.T) {
	el := newEngineLab(t)
	clk := clocktesting.NewFakeClock(time.Now())
	e := el.engineWith(t, EngineConfig{Clock: clk, StartGrace: time.Minute})
	e.SetDesired(nil)

	e.SetAPIReachable(false)
	w, _, d := el.container(t, "outage", 0, 2)
	if r, ok := e.PlaceAtStart(d); !ok || r.Reason != numav1.ReasonApplied {
		t.Fatalf("PlaceAtStart during the outage = %+v, %v; want Applied", r, ok)
	}
	for i := range 5 {
		clk.Step(time.Minute)
		e.SetDesired(nil) // the cache, unchanged since the outage began
		if v := el.settle(t, e, w.Pid()); !allEqual(v, 0) {
			t.Fatalf("%d min into the outage, the start was undone: %v", i+1, v)
		}
	}

	// The API answers again: the grace starts over.
	e.SetAPIReachable(true)
	clk.Step(59 * time.Second)
	if v := el.settle(t, e, w.Pid()); !allEqual(v, 0) {
		t.Fatalf("undone within the grace after the outage: %v", v)
	}
	clk.Step(time.Second)
	e.Pass()
	if v := el.values(t, w.Pid()); !allEqual(v, -1) {
		t.Errorf("a start the API never confirmed after the outage is still placed past the grace: %v", v)
	}
}

// TestEngineObservesStartToPlacedOnTheHost: a container started after the engine and
// placed by a full pass is observed from its tasks' start in /proc to its SET on
// CLOCK_BOOTTIME, the clock those start times count on.
func TestEngineObservesStartToPlacedOnTheHost(t *testing.T) {
	el := newEngineLab(t)
	m := NewMetrics()
	e := el.engineWith(t, EngineConfig{Metrics: m})
	// Start times count whole ticks: the container starts in a tick after the engine's.
	tick := uint64(time.Second / numa.TicksPerSecond)
	made := boottime(t)
	waitFor(t, "the next clock tick", func() bool { return boottime(t)/tick > made/tick })
	w, _, d := el.container(t, "late", 0, 2)
	// The container's start is its earliest task's (its init's), the latest its tasks
	// started by now.
	tids, err := hostlab.TasksOf(w.Pid())
	if err != nil {
		t.Fatal(err)
	}
	earliest, latest := uint64(math.MaxUint64), uint64(0)
	for _, tid := range tids {
		task, err := numa.ReadTask("/proc", tid)
		if err != nil {
			t.Fatal(err)
		}
		earliest, latest = min(earliest, task.StartTime*tick), max(latest, task.StartTime*tick)
	}
	before := boottime(t)
	e.SetDesired([]desire.Desire{d})
	if v := el.settle(t, e, w.Pid()); !allEqual(v, 0) {
		t.Fatalf("the container's tasks have %v; want 0", v)
	}
	after := boottime(t)
	shortest, longest := time.Duration(before-latest).Seconds(), time.Duration(after-earliest).Seconds()
	if got := startToPlaced(t, m, PlacedAtAfterStart); got.count != 1 || got.sum < shortest || got.sum > longest {
		t.Errorf("start to placed, AfterStart = %+v; want one observation of %.3f to %.3f s", got, shortest, longest)
	}
	if r := e.Results()[d.Key()]; r.PlacedAt != PlacedAtAfterStart {
		t.Errorf("placed by a full pass: PlacedAt %q, want %q", r.PlacedAt, PlacedAtAfterStart)
	}
}

// boottime reads CLOCK_BOOTTIME.
func boottime(t *testing.T) uint64 {
	t.Helper()
	now, ok := numa.BoottimeNs()
	if !ok {
		t.Fatal("CLOCK_BOOTTIME cannot be read")
	}
	return now
}

// init reads the value of w's init task (its process's main thread).
func (el *engineLab) init(t *testing.T, w *hostlab.Workload) int {
	t.Helper()
	v, err := el.emu.Get(w.Pid())
	if err != nil {
		t.Fatalf("emulated GET of %d: %v", w.Pid(), err)
	}
	return v
}

// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package nodeagent

import (
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clocktesting "k8s.io/utils/clock/testing"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
	"github.com/numapref/numapref/internal/nodeagent/desire"
)

// Unit tests of how each container's result says it was first placed (placedat.go), and of
// numapref_start_to_placed_seconds, on the fake host: its task tid started at tick
// 1000+tid (task 100 11 s after boot), and the tests move CLOCK_BOOTTIME.

// bootClock is an injected CLOCK_BOOTTIME.
type bootClock struct{ ns atomic.Uint64 }

func newBootClock(at time.Duration) *bootClock {
	b := &bootClock{}
	b.set(at)
	return b
}

func (b *bootClock) set(at time.Duration)       { b.ns.Store(uint64(at)) }
func (b *bootClock) read() (uint64, bool)       { return b.ns.Load(), true }
func (b *bootClock) unreadable() (uint64, bool) { return 0, false }

// startToPlaced reads numapref_start_to_placed_seconds{at}.
func startToPlaced(t *testing.T, m *Metrics, at string) histStats {
	t.Helper()
	return histogramStats(t, m.StartToPlaced.WithLabelValues(at).(prometheus.Histogram))
}

// placedAt is the PlacedAt of the fake host's container in e's last results, with its
// reason.
func placedAt(e *Engine) (string, string) {
	r := e.Results()[fakeDesire(1).Key()]
	return r.PlacedAt, r.Reason
}

// A container placed by a full pass is AfterStart, observed from its earliest task's start
// to the SETs on CLOCK_BOOTTIME; later passes keep the verdict and observe it no more.
func TestPlacedAfterStartByAFullPass(t *testing.T) {
	h := newFakeHost(t)
	h.addTask(101, -1) // started at 11.01 s
	h.addTask(100, -1) // at 11.00 s: the container's start
	boot := newBootClock(9 * time.Second)
	m := NewMetrics()
	e := h.engine(EngineConfig{Metrics: m, Boottime: boot.read})
	e.SetDesired([]desire.Desire{fakeDesire(1)})
	boot.set(12500 * time.Millisecond)
	e.Pass()
	if at, reason := placedAt(e); at != PlacedAtAfterStart || reason != numav1.ReasonApplied {
		t.Fatalf("placed by a full pass: PlacedAt %q, reason %s; want %q, Applied", at, reason, PlacedAtAfterStart)
	}
	if got, want := startToPlaced(t, m, PlacedAtAfterStart), (histStats{count: 1, sum: 1.5}); got != want {
		t.Errorf("start to placed, AfterStart = %+v, want %+v (12.5 s - 11.0 s)", got, want)
	}

	// A new thread set by a later pass: the container was placed already.
	h.addTask(102, -1)
	boot.set(20 * time.Second)
	e.Pass()
	if at, _ := placedAt(e); at != PlacedAtAfterStart {
		t.Errorf("after a later pass: PlacedAt %q, want %q", at, PlacedAtAfterStart)
	}
	if got := startToPlaced(t, m, PlacedAtAfterStart).count; got != 1 {
		t.Errorf("start to placed, AfterStart observed %d times, want once per container", got)
	}
	if got := startToPlaced(t, m, PlacedAtStart).count; got != 0 {
		t.Errorf("start to placed, Start observed %d times; no start pass ran", got)
	}
}

// A container older than the engine (an agent restarted among running containers, with no
// ledger entry for it) is AfterStart but not observed: how long it ran is not how soon
// the agent placed it. Nor is any container when CLOCK_BOOTTIME cannot be read.
func TestPlacedAfterStartNotObservedForOlderContainers(t *testing.T) {
	for name, boottime := range map[string]func(*bootClock) func() (uint64, bool){
		"started before the engine": func(b *bootClock) func() (uint64, bool) { return b.read },
		"no CLOCK_BOOTTIME":         func(b *bootClock) func() (uint64, bool) { return b.unreadable },
	} {
		t.Run(name, func(t *testing.T) {
			h := newFakeHost(t)
			h.addTask(100, -1) // started at 11.00 s
			boot := newBootClock(11*time.Second + 5*time.Millisecond)
			m := NewMetrics()
			e := h.engine(EngineConfig{Metrics: m, Boottime: boottime(boot)})
			e.SetDesired([]desire.Desire{fakeDesire(1)})
			boot.set(30 * time.Second)
			e.Pass()
			if at, _ := placedAt(e); at != PlacedAtAfterStart {
				t.Errorf("PlacedAt %q, want %q", at, PlacedAtAfterStart)
			}
			if got := startToPlaced(t, m, PlacedAtAfterStart).count; got != 0 {
				t.Errorf("start to placed, AfterStart observed %d times; want none", got)
			}
		})
	}
}

// A container placed by a start pass is Start, observed as 0, and stays Start through
// the rescans within the grace and the API's confirmation. Undone (the start the API
// never confirms, after the grace) and placed again by a full pass, it is judged again:
// AfterStart. Run again under a new container ID, by a start pass, it is Start again.
func TestPlacedAtStartUntilUndone(t *testing.T) {
	h := newFakeHost(t)
	h.addTask(100, -1)
	fc := clocktesting.NewFakeClock(time.Now())
	boot := newBootClock(5 * time.Second)
	m := NewMetrics()
	e := h.engine(EngineConfig{Metrics: m, Clock: fc, Boottime: boot.read, StartGrace: time.Minute})
	e.SetDesired(nil)
	boot.set(20 * time.Second)
	d := fakeDesire(1)
	if r, ok := e.PlaceAtStart(d); !ok || r.PlacedAt != PlacedAtStart || r.Reason != numav1.ReasonApplied {
		t.Fatalf("PlaceAtStart = %+v, %v; want Applied, PlacedAt %q", r, ok, PlacedAtStart)
	}
	if got, want := startToPlaced(t, m, PlacedAtStart), (histStats{count: 1}); got != want {
		t.Errorf("start to placed, Start = %+v, want %+v", got, want)
	}

	// A rescan within the grace, a new thread set by it, and the API's confirmation.
	e.SetDesired(nil)
	h.addTask(101, -1)
	e.Pass()
	if at, reason := placedAt(e); at != PlacedAtStart || reason != numav1.ReasonApplied {
		t.Errorf("after a rescan within the grace: PlacedAt %q, reason %s; want %q, Applied", at, reason, PlacedAtStart)
	}
	e.SetDesired([]desire.Desire{d})
	e.Pass()
	if at, reason := placedAt(e); at != PlacedAtStart || reason != numav1.ReasonApplied {
		t.Errorf("after the API's confirmation: PlacedAt %q, reason %s; want %q, Applied", at, reason, PlacedAtStart)
	}
	if got := startToPlaced(t, m, PlacedAtStart).count; got != 1 {
		t.Errorf("start to placed, Start observed %d times, want once", got)
	}

	// The API no longer selects it: undone. Selected again, a full pass places it anew.
	e.SetDesired(nil)
	e.Pass()
	if v := h.value(100); v != -1 {
		t.Fatalf("after the undo, task 100 has %d, want -1", v)
	}
	if _, ok := e.Results()[d.Key()]; ok {
		t.Fatalf("an undone container still has a result: %+v", e.Results()[d.Key()])
	}
	e.SetDesired([]desire.Desire{d})
	e.Pass()
	if at, _ := placedAt(e); at != PlacedAtAfterStart {
		t.Errorf("undone and placed again by a full pass: PlacedAt %q, want %q", at, PlacedAtAfterStart)
	}
	if got, want := startToPlaced(t, m, PlacedAtAfterStart), (histStats{count: 1, sum: 9}); got != want {
		t.Errorf("start to placed, AfterStart = %+v, want %+v (20 s - 11.0 s)", got, want)
	}

	// The container runs again under a new ID: new tasks, placed at their start.
	h.moveOut(100)
	h.moveOut(101)
	h.addTask(200, -1)
	again := d
	again.Ref.ContainerID = "containerd://y"
	if r, ok := e.PlaceAtStart(again); !ok || r.PlacedAt != PlacedAtStart {
		t.Errorf("the container restarted, PlaceAtStart = %+v, %v; want PlacedAt %q", r, ok, PlacedAtStart)
	}
	if got := startToPlaced(t, m, PlacedAtStart).count; got != 2 {
		t.Errorf("start to placed, Start observed %d times, want 2: once per container run", got)
	}
}

// A container whose ledger entry was there when the engine started was placed by an
// earlier run of the agent: BeforeAgentStart, even with no SET (its tasks hold the node),
// and it is not observed.
func TestPlacedBeforeRestart(t *testing.T) {
	h := newFakeHost(t)
	h.addTask(100, -1)
	path := filepath.Join(t.TempDir(), "ledger.json")
	first := h.engine(EngineConfig{LedgerPath: path})
	first.SetDesired([]desire.Desire{fakeDesire(1)})
	first.Pass()

	h.addTask(101, -1) // born while no agent ran
	boot := newBootClock(5 * time.Second)
	m := NewMetrics()
	e := h.engine(EngineConfig{LedgerPath: path, Metrics: m, Boottime: boot.read})
	e.SetDesired([]desire.Desire{fakeDesire(1)})
	boot.set(30 * time.Second)
	e.Pass()
	if at, reason := placedAt(e); at != PlacedBeforeRestart || reason != numav1.ReasonApplied {
		t.Errorf("placed before the restart: PlacedAt %q, reason %s; want %q, Applied", at, reason, PlacedBeforeRestart)
	}
	if v := h.value(101); v != 1 {
		t.Errorf("the thread born while no agent ran has %d, want 1", v)
	}
	for _, at := range []string{PlacedAtStart, PlacedAtAfterStart} {
		if got := startToPlaced(t, m, at).count; got != 0 {
			t.Errorf("start to placed, %s observed %d times; want none", at, got)
		}
	}
}

// A full pass that takes the pass lock while PlaceAtStart waits for it sets the starting
// container before the runtime starts it: that is a placement at its start. Once
// PlaceAtStart has returned, the runtime runs the container, and a pass that sets it later
// places it after its start.
func TestPlacedAtStartByAPassThatWentFirst(t *testing.T) {
	for _, placing := range []bool{true, false} {
		h := newFakeHost(t)
		h.addTask(100, -1)
		m := NewMetrics()
		e := h.engine(EngineConfig{Metrics: m, Boottime: newBootClock(9 * time.Second).read})
		e.SetDesired(nil)
		d := fakeDesire(1)
		e.desires.start(d) // what PlaceAtStart does before it waits for the pass lock
		if !placing {
			e.desires.started(d.Key())
		}
		e.Pass()
		want := PlacedAtAfterStart
		if placing {
			want = PlacedAtStart
		}
		if at, reason := placedAt(e); at != want || reason != numav1.ReasonApplied {
			t.Errorf("placing %v: PlacedAt %q, reason %s; want %q, Applied", placing, at, reason, want)
		}
	}
}

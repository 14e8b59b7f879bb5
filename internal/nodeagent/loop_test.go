// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package nodeagent

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/numapref/numapref/internal/nodeagent/desire"
	"github.com/numapref/numapref/internal/numa"
)

// Unit tests of the apply loop (Start) on a fake host and a fake clock: what starts a
// pass, and what the engine measures on its clock.

// A task that appears without a fork event (no proc connector, or an event lost) gets the
// node on the next rescan: a tick of the engine's clock, not of the wall's.
func TestEngineRescansOnEveryTick(t *testing.T) {
	h := newFakeHost(t)
	h.addTask(100, -1)
	m := NewMetrics()
	fc := clocktesting.NewFakeClock(time.Now())
	e := h.engine(EngineConfig{RescanInterval: 10 * time.Second, Metrics: m, Clock: fc})
	startEngine(t, e)
	e.SetDesired([]desire.Desire{fakeDesire(1)})
	waitFor(t, "the desire's pass set task 100", func() bool { return passStats(t, m, "full").count == 1 })
	if v := h.value(100); v != 1 {
		t.Fatalf("task 100 holds %d after the desire's pass, want 1", v)
	}

	h.addTask(101, -1)
	for i := range 3 {
		fc.Step(10 * time.Second)
		waitFor(t, "the rescan ran", func() bool { return passStats(t, m, "full").count == uint64(2+i) })
	}
	if v := h.value(101); v != 1 {
		t.Errorf("task 101, born after the desire's pass, holds %d after the rescans, want 1", v)
	}
	if n := passStats(t, m, "fork").count; n != 0 {
		t.Errorf("%d fork passes without a fork event, want 0", n)
	}
}

// A fork pass that does not list the event's task (the kernel sends the event before it
// moves the child into its cgroup) looks again after each of ForkRetryDelays, on the
// engine's clock, until a look lists the task or the delays run out.
func TestEngineLooksAgainForAForkedTask(t *testing.T) {
	tests := map[string]struct {
		// joinsAfter is the number of looks again after which the child is in the
		// container; -1 for never.
		joinsAfter int
		wantPasses uint64
		wantNode   int
	}{
		"listed by the first look again":                 {joinsAfter: 0, wantPasses: 2, wantNode: 1},
		"listed by the second look again":                {joinsAfter: 1, wantPasses: 3, wantNode: 1},
		"never listed: two looks, then the rescan's job": {joinsAfter: -1, wantPasses: 3, wantNode: -1},
	}
	delays := []time.Duration{time.Millisecond, 10 * time.Millisecond}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			h := newFakeHost(t)
			h.addTask(100, -1)
			events := make(chan numa.ProcEvent, 1)
			m := NewMetrics()
			fc := clocktesting.NewFakeClock(time.Now())
			e := h.engine(EngineConfig{ProcEvents: events, ForkRetryDelays: delays, Metrics: m, Clock: fc})
			startEngine(t, e)
			e.SetDesired([]desire.Desire{fakeDesire(1)})
			waitFor(t, "the desire's pass", func() bool { return passStats(t, m, "full").count == 1 })

			events <- numa.ProcEvent{Kind: numa.ProcEventFork, ParentTGID: 100, ParentTID: 100, ChildTGID: 200, ChildTID: 200}
			for look, d := range delays {
				// The rescan ticker, and the timer of this look.
				waitFor(t, "a timer to look again", func() bool {
					return passStats(t, m, "fork").count == uint64(1+look) && fc.Waiters() == 2
				})
				if look == tc.joinsAfter {
					h.addTask(200, -1)
				}
				fc.Step(d)
				if look == tc.joinsAfter {
					break
				}
			}
			waitFor(t, "the last look", func() bool { return passStats(t, m, "fork").count == tc.wantPasses })
			waitFor(t, "no timer but the rescan's", func() bool { return fc.Waiters() == 1 })
			if tc.joinsAfter >= 0 {
				if v := h.value(200); v != tc.wantNode {
					t.Errorf("the child holds %d, want %d", v, tc.wantNode)
				}
			}
			if n := passStats(t, m, "full").count; n != 1 {
				t.Errorf("%d full passes, want 1 (the desire's): looks again are one-container passes", n)
			}
		})
	}
}

// Pass durations and the fork lag measured from an event's arrival (for events without a
// kernel timestamp) are read on the engine's clock: here the fake kernel moves the clock
// by 2 ms in every GET and 3 ms in every SET.
func TestEngineTimesPassesAndForkLagOnItsClock(t *testing.T) {
	h := newFakeHost(t)
	h.addTask(100, -1)
	fc := clocktesting.NewFakeClock(time.Now())
	h.onGet = func(int) { fc.Step(2 * time.Millisecond) }
	h.onSet = func(int) { fc.Step(3 * time.Millisecond) }
	m := NewMetrics()
	e := h.engine(EngineConfig{Metrics: m, Clock: fc})
	e.SetDesired([]desire.Desire{fakeDesire(1)})
	e.Pass() // GET of task 100, and its SET with the GET right before it
	if got, want := passStats(t, m, "full"), (histStats{count: 1, sum: (7 * time.Millisecond).Seconds()}); got != want {
		t.Errorf("full pass durations = %+v, want %+v", got, want)
	}

	// A new thread's event without a timestamp: its pass trusts task 100 (set by the last
	// pass), so it reads and sets only the new task.
	h.addTask(101, -1)
	e.onProcEvent(numa.ProcEvent{Kind: numa.ProcEventFork, ParentTGID: 1, ParentTID: 1, ChildTGID: 100, ChildTID: 101})
	if v := h.value(101); v != 1 {
		t.Fatalf("the new thread holds %d after its fork pass, want 1", v)
	}
	want := histStats{count: 1, sum: (7 * time.Millisecond).Seconds()}
	if got := passStats(t, m, "fork"); got != want {
		t.Errorf("fork pass durations = %+v, want %+v", got, want)
	}
	if got := histogramStats(t, m.ForkLag.WithLabelValues(lagSinceArrival).(prometheus.Histogram)); got != want {
		t.Errorf("fork lag since arrival = %+v, want %+v", got, want)
	}
	// Its stages: the GET of the new task is the plan, the bracket's GET and the SET are
	// the set stage; the rest took no time on this clock, and deliver is 0 without a
	// kernel timestamp.
	for stage, d := range map[string]time.Duration{stageDeliver: 0, stageWait: 0, stageRetry: 0,
		stagePlan: 2 * time.Millisecond, stageWriteAhead: 0, stageSet: 5 * time.Millisecond} {
		want := histStats{count: 1, sum: d.Seconds()}
		if got := stageStats(t, m, stage); got != want {
			t.Errorf("fork stage %s = %+v, want %+v", stage, got, want)
		}
	}
}

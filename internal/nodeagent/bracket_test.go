// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package nodeagent

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
	"github.com/numapref/numapref/internal/nodeagent/desire"
	"github.com/numapref/numapref/internal/nodeagent/plan"
)

// Unit tests of the checks around every SET, on a fake host whose tasks have no pidfd
// (start time and listing alone; the host tier has the pidfd): the test seams of a pass
// give a task's id to a stranger at the worst moments.

// The stranger takes the id right before the SET, which hits it: the check after the SET
// sees the task gone from the container, counts a raced SET and gives the stranger its
// value back.
func TestEngineRacedSetIsPutBack(t *testing.T) {
	h := newFakeHost(t)
	h.addTask(100, -1)
	h.addTask(101, -1)
	m := NewMetrics()
	e := h.engine(EngineConfig{Metrics: m, hooks: engineHooks{beforeSet: func(tid int) {
		if tid == 101 && h.hasTask(101) {
			h.replaceTask(-1, false) // outside the container, with a value of its own
		}
	}}})
	e.SetDesired([]desire.Desire{fakeDesire(1)})
	e.Pass()
	if v := h.snapshot(); v[100] != 1 || v[101] != -1 {
		t.Errorf("tasks hold %v; want 100 at 1 and the stranger with id 101 at its own -1", v)
	}
	if n := testutil.ToFloat64(m.Sets.WithLabelValues(resultRaced)); n != 1 {
		t.Errorf(`numapref_task_sets_total{result="raced"} = %v, want 1`, n)
	}
	if n := testutil.ToFloat64(m.Sets.WithLabelValues(numav1.ReasonApplied)); n != 1 {
		t.Errorf(`numapref_task_sets_total{result="Applied"} = %v, want 1`, n)
	}
	if r := e.Results()[fakeDesire(1).Key()]; r.Reason != numav1.ReasonApplied || r.Tasks != 1 {
		t.Errorf("result %s with %d tasks, want Applied with 1", r.Reason, r.Tasks)
	}
	if te := ledgerTask(e, fakeDesire(1).Key(), 101); te != nil {
		t.Errorf("the ledger still has task 101: %+v", te)
	}
}

// Between planning and the SET (the window holds the other containers' planning and the
// ledger's fsyncs) the id changes hands, or its task leaves the container: the checks
// before the SET see it, and no SET is issued on the id, whether the new task is outside
// the container (the listing shows it), inside it (its start time does), or the task
// itself left (the listing). The next pass sets a new task inside like any other.
func TestEngineSetsNoRecycledID(t *testing.T) {
	tests := map[string]struct {
		change   func(h *fakeHost)
		wantNext int
	}{
		"stranger outside the container":  {func(h *fakeHost) { h.replaceTask(-1, false) }, -1},
		"new task inside the container":   {func(h *fakeHost) { h.replaceTask(-1, true) }, 1},
		"task moved out of the container": {func(h *fakeHost) { h.moveOut(101) }, -1},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			h := newFakeHost(t)
			h.addTask(100, -1)
			h.addTask(101, -1)
			var setOn []int
			h.onSet = func(tid int) { setOn = append(setOn, tid) }
			m := NewMetrics()
			changed := false
			e := h.engine(EngineConfig{Metrics: m, hooks: engineHooks{afterWriteAhead: func() {
				if !changed {
					changed = true
					tc.change(h)
				}
			}}})
			e.SetDesired([]desire.Desire{fakeDesire(1)})
			e.Pass()
			if len(setOn) != 1 || setOn[0] != 100 || h.value(101) != -1 {
				t.Errorf("SETs on %v, task 101 holds %d; want one SET, on 100, and 101 untouched", setOn, h.value(101))
			}
			if n := testutil.ToFloat64(m.Sets.WithLabelValues(resultRaced)); n != 0 {
				t.Errorf(`numapref_task_sets_total{result="raced"} = %v, want 0: nothing was issued`, n)
			}
			e.Pass()
			if v := h.value(101); v != tc.wantNext {
				t.Errorf("after the next pass task 101 holds %d, want %d", v, tc.wantNext)
			}
		})
	}
}

// The task leaves the container right before its SET, which hits it: the check after the
// SET sees it gone from the container, counts a raced SET and gives it back its value.
func TestEngineSetOnATaskLeavingIsPutBack(t *testing.T) {
	h := newFakeHost(t)
	h.addTask(100, -1)
	h.addTask(101, 0) // its own choice
	m := NewMetrics()
	e := h.engine(EngineConfig{Metrics: m, hooks: engineHooks{beforeSet: func(tid int) {
		if tid == 101 {
			h.moveOut(101)
		}
	}}})
	e.SetDesired([]desire.Desire{fakeDesire(1)})
	e.Pass()
	if v := h.snapshot(); v[100] != 1 || v[101] != 0 {
		t.Errorf("tasks hold %v; want 100 at 1 and 101, gone from the container, back at its own 0", v)
	}
	if n := testutil.ToFloat64(m.Sets.WithLabelValues(resultRaced)); n != 1 {
		t.Errorf(`numapref_task_sets_total{result="raced"} = %v, want 1`, n)
	}
}

// An undo SET that races is counted but not put back: the value before it was the
// agent's, which a stranger must not get.
func TestEngineRacedUndoIsNotPutBack(t *testing.T) {
	h := newFakeHost(t)
	h.addTask(100, -1)
	h.addTask(101, -1)
	m := NewMetrics()
	var undoing bool
	e := h.engine(EngineConfig{Metrics: m, hooks: engineHooks{beforeSet: func(tid int) {
		if undoing && tid == 101 && h.hasTask(101) {
			h.replaceTask(0, false)
		}
	}}})
	e.SetDesired([]desire.Desire{fakeDesire(1)})
	e.Pass()
	undoing = true
	e.SetDesired(nil)
	e.Pass()
	if v := h.snapshot(); v[100] != -1 || v[101] == 1 {
		t.Errorf("after undo tasks hold %v; want 100 at -1 and the stranger 101 never at the agent's 1", v)
	}
	if n := testutil.ToFloat64(m.Sets.WithLabelValues(resultRaced)); n != 1 {
		t.Errorf(`numapref_task_sets_total{result="raced"} = %v, want 1`, n)
	}
	if n := testutil.ToFloat64(m.Restores); n != 1 {
		t.Errorf("numapref_task_restores_total = %v, want 1 (task 100)", n)
	}
}

// fakePIDFDs opens handles that are always alive and counts those open.
type fakePIDFDs struct{ opened, open int }

type fakeHandle struct{ owner *fakePIDFDs }

func (h fakeHandle) Alive() (bool, error) { return true, nil }
func (h fakeHandle) Close() error         { h.owner.open--; return nil }

func (f *fakePIDFDs) handles(int, int) (plan.TaskHandle, error) {
	f.opened++
	f.open++
	return fakeHandle{f}, nil
}

// A pass holds at most maxPIDFDs pidfds (the tasks past it are identified by start time
// alone), and closes every one it opened when it ends.
func TestEnginePIDFDsAreBoundedAndReleased(t *testing.T) {
	h := newFakeHost(t)
	for tid := 100; tid < 104; tid++ {
		h.addTask(tid, -1)
	}
	f := &fakePIDFDs{}
	e := h.engine(EngineConfig{})
	e.cfg.handles, e.cfg.maxPIDFDs = f.handles, 2
	e.SetDesired([]desire.Desire{fakeDesire(1)})
	e.Pass()
	if v := h.snapshot(); v[100] != 1 || v[101] != 1 || v[102] != 1 || v[103] != 1 {
		t.Errorf("tasks hold %v, want all at 1", v)
	}
	if f.opened != 2 || f.open != 0 {
		t.Errorf("%d pidfds opened, %d left open; want 2 opened (the bound), none left", f.opened, f.open)
	}
}

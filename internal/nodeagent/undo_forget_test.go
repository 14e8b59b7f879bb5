// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package nodeagent

import (
	"testing"
	"time"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
	"github.com/numapref/numapref/internal/nodeagent/desire"
	"github.com/numapref/numapref/internal/numa"
)

// Undo never forgets, scenario 1: a tid the agent set is reused, inside the container, by
// a thread that inherited the agent's value. Undo must restore that thread too (it is an
// inheritor: no node), whether or not a pass refreshed its ledger entry before: a fork
// pass for the thread's event, or a full pass after lost events, refreshes it.
func TestUndoRestoresReusedTIDThatInherited(t *testing.T) {
	tests := map[string]struct {
		event     *numa.ProcEvent // delivered after the reuse; else a plain full pass runs
		refreshed bool            // the pass after the reuse records the new thread's start time
	}{
		"a full pass: undo restores the stale-entry task": {},
		"fork event of the thread: its pass refreshes the entry": {refreshed: true,
			event: &numa.ProcEvent{Kind: numa.ProcEventFork, ParentTGID: 100, ParentTID: 100, ChildTGID: 100, ChildTID: 101}},
		"fork events lost: the full pass refreshes the entry": {refreshed: true, event: &numa.ProcEvent{Kind: numa.ProcEventLost}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			h := newFakeHost(t)
			h.addTask(100, -1)
			h.addTask(101, -1)
			e := h.engine(EngineConfig{ForkRetryDelays: []time.Duration{}})
			key := fakeDesire(1).Key()
			e.SetDesired([]desire.Desire{fakeDesire(1)})
			e.Pass()
			old := ledgerTask(e, key, 101)
			h.replaceTask(1, true) // a new thread took tid 101 and inherited node 1
			if tc.event != nil {
				e.onProcEvent(*tc.event)
			} else {
				e.Pass()
			}
			if got := ledgerTask(e, key, 101); tc.refreshed && (got == nil || got.Start == old.Start || got.Prev != numa.NoNode) {
				t.Errorf("ledger entry of the reused tid: %+v, want the new thread's start time and prev -1 (was %+v)", got, old)
			}
			e.SetDesired(nil)
			e.Pass()
			if v := h.snapshot(); v[100] != numa.NoNode || v[101] != numa.NoNode {
				t.Errorf("after undo tasks hold %v, want every one at -1 (the reused tid kept the agent's node)", v)
			}
			if e.ledger.Len() != 0 {
				t.Errorf("ledger after undo: %v, want empty", e.ledger.View().Clone())
			}
		})
	}
}

// Undo never forgets, scenario 2: FollowCPUs moves a container from node 0 to node 1 while
// the listing before the SETs fails. The task's ledger entry must survive (it still holds
// node 0, which the agent set), and the next pass must not record node 0 as the value to
// restore: undo gives the task back -1, not 0.
func TestFailedListingKeepsTheValueToRestore(t *testing.T) {
	h := newFakeHost(t)
	h.addTask(100, -1)
	h.setCPUs([]int{0}, 0)
	e := h.engine(EngineConfig{CPUNode: map[int]int{0: 0, 1: 1}})
	d := fakeDesire(numa.NoNode)
	d.Placement = desire.Placement{Mode: numav1.PlacementModeFollowCPUs}
	e.SetDesired([]desire.Desire{d})
	e.Pass()
	if v := h.value(100); v != 0 {
		t.Fatalf("FollowCPUs on cpu 0: task holds %d, want 0", v)
	}
	h.setCPUs([]int{1}, 1) // moved to node 1's CPU; the listing before the SET fails once
	e.Pass()
	if v := h.value(100); v != 0 {
		t.Fatalf("with the listing failed: task holds %d, want still 0 (no SET)", v)
	}
	if te := ledgerTask(e, d.Key(), 100); te == nil || te.Prev != numa.NoNode {
		t.Errorf("ledger entry after the failed listing: %+v, want kept with prev -1", te)
	}
	e.Pass()
	if v := h.value(100); v != 1 {
		t.Fatalf("next pass: task holds %d, want 1", v)
	}
	e.SetDesired(nil)
	e.Pass()
	if v := h.value(100); v != numa.NoNode {
		t.Errorf("after undo the task holds %d, want -1 (the value it had before the agent)", v)
	}
}

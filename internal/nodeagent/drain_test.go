// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package nodeagent

import (
	"testing"

	"github.com/numapref/numapref/internal/nodeagent/desire"
	"github.com/numapref/numapref/internal/numa"
)

// Drain undoes every value the agent set and places nothing from then on: neither a new
// desired state nor a fork event acts.
func TestDrainUndoesEverythingAndPlacesNothing(t *testing.T) {
	h := newFakeHost(t)
	h.addTask(100, -1)
	h.addTask(101, 0) // had node 0 before the agent
	e := h.engine(EngineConfig{ProcEvents: make(chan numa.ProcEvent)})
	e.SetDesired([]desire.Desire{fakeDesire(1)})
	e.Pass()
	if v := h.snapshot(); v[100] != 1 || v[101] != 1 {
		t.Fatalf("before Drain tasks hold %v, want 1", v)
	}
	if left := e.Drain(); left != 0 {
		t.Errorf("Drain left %d containers in the ledger, want 0", left)
	}
	if v := h.snapshot(); v[100] != numa.NoNode || v[101] != 0 {
		t.Errorf("after Drain tasks hold %v, want 100 at -1 and 101 at 0", v)
	}
	e.SetDesired([]desire.Desire{fakeDesire(1)})
	e.Pass()
	h.addTask(102, -1)
	e.onProcEvent(numa.ProcEvent{Kind: numa.ProcEventFork, ParentTGID: 100, ParentTID: 100, ChildTGID: 100, ChildTID: 102})
	if v := h.snapshot(); v[100] != numa.NoNode || v[101] != 0 || v[102] != numa.NoNode {
		t.Errorf("after Drain, a new desire, a pass and a fork: tasks hold %v, want nothing placed", v)
	}
	if e.ledger.Len() != 0 {
		t.Errorf("ledger after Drain: %v, want empty", e.ledger.View().Clone())
	}
}

// Drain counts the containers whose undo failed: here the kernel became unusable, so
// nothing can be restored and the entry stays.
func TestDrainCountsWhatRemains(t *testing.T) {
	h := newFakeHost(t)
	h.addTask(100, -1)
	e := h.engine(EngineConfig{})
	e.SetDesired([]desire.Desire{fakeDesire(1)})
	e.Pass()
	e.cfg.Support.Supported = false
	if left := e.Drain(); left != 1 {
		t.Errorf("Drain with a kernel that cannot be read left %d containers, want 1", left)
	}
}

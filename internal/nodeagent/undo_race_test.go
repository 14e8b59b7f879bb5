// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package nodeagent

import (
	"testing"

	"github.com/numapref/numapref/internal/nodeagent/desire"
)

// TestEngineUndoRacesThreadCreation: undo restores tasks one by one; a thread created
// meanwhile by a task that still holds the agent's value inherits it (threads and CLONE_VM
// children copy their creator's numa_preferred_nid_force). Undo lists again after
// restoring, so that thread is restored too instead of keeping the node for ever.
func TestEngineUndoRacesThreadCreation(t *testing.T) {
	h := newFakeHost(t)
	h.addTask(100, -1)
	h.addTask(101, -1)
	e := h.engine(EngineConfig{})
	e.SetDesired([]desire.Desire{fakeDesire(1)})
	e.Pass()
	if h.value(100) != 1 || h.value(101) != 1 {
		t.Fatalf("not applied: %v", h.snapshot())
	}

	// Undo: while the first task is being restored (after the listing), task 101, still
	// at node 1, starts a thread, which inherits node 1.
	h.onGet = func(int) {
		if !h.hasTask(102) {
			h.addTask(102, h.value(101))
		}
	}
	e.SetDesired(nil)
	e.Pass()
	h.onGet = nil
	e.Pass()
	for tid, v := range h.snapshot() {
		if v != -1 {
			t.Errorf("after undo, task %d holds node %d, want -1 (values %v)", tid, v, h.snapshot())
		}
	}
}

// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package nodeagent

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
	"github.com/numapref/numapref/internal/nodeagent/desire"
	"github.com/numapref/numapref/internal/numa"
)

// A fork pass plans from what its event says (the new task, its process, its creator's
// container): for a container whose last pass applied every task, it reads nothing of the
// container's cgroup but the bracket's two listings around the SET. A new thread that
// inherited the node needs no SET, and no listing at all.
func TestForkPassPlansFromItsEvent(t *testing.T) {
	h := newFakeHost(t)
	h.addTask(100, -1)
	e := h.engine(EngineConfig{})
	e.SetDesired([]desire.Desire{fakeDesire(1)})
	e.Pass()
	before := h.readCounts()

	h.addTask(200, -1) // a fork() child: the kernel resets its node
	e.onProcEvent(numa.ProcEvent{Kind: numa.ProcEventFork, ParentTGID: 100, ParentTID: 100, ChildTGID: 200, ChildTID: 200})
	if v := h.value(200); v != 1 {
		t.Fatalf("the forked child holds %d after its fork pass, want 1", v)
	}
	got := h.readCounts()
	for method, want := range map[string]int{"Resolve": 0, "Cpuset": 0, "ListTIDs": 0, "ThreadIDs": 2} {
		if n := got[method] - before[method]; n != want {
			t.Errorf("the fork pass called %s %d times, want %d", method, n, want)
		}
	}
	r := e.Results()[fakeDesire(1).Key()]
	if r.Reason != numav1.ReasonApplied || r.Tasks != 2 {
		t.Errorf("result after the fork pass: %s with %d tasks, want Applied with 2", r.Reason, r.Tasks)
	}
	if !e.listed(fakeDesire(1).Key(), 200) {
		t.Errorf("the child is not in the container's listing: its own forks would not find the container")
	}

	before = got
	h.addTask(201, 1) // a new thread of the child: it inherited the node
	e.onProcEvent(numa.ProcEvent{Kind: numa.ProcEventFork, ParentTGID: 100, ParentTID: 100, ChildTGID: 200, ChildTID: 201})
	if diff := cmp.Diff(before, h.readCounts()); diff != "" {
		t.Errorf("the inherited thread's fork pass read the cgroup (-before +after):\n%s", diff)
	}
	if entry, ok := e.ledger.View().Entry(fakeDesire(1).Key()).Task(201); !ok || entry.Prev != numa.NoNode {
		t.Errorf("the inherited thread's ledger entry = %+v, %v; want one restoring no node", entry, ok)
	}

	// The full pass after finds what the fork passes found.
	e.Pass()
	if r := e.Results()[fakeDesire(1).Key()]; r.Tasks != 3 {
		t.Errorf("the full pass counts %d tasks, want 3", r.Tasks)
	}
}

// A task the event names but the container does not hold when it is set (not in its
// cgroup yet, or never: CLONE_INTO_CGROUP) is not set, and leaves the listing: the
// event's looks again list the container.
func TestForkPassFromItsEventSetsNoTaskOutsideTheContainer(t *testing.T) {
	h := newFakeHost(t)
	h.addTask(100, -1)
	e := h.engine(EngineConfig{})
	e.SetDesired([]desire.Desire{fakeDesire(1)})
	e.Pass()

	h.addTask(200, -1)
	h.moveOut(200)
	e.forkPass(fakeDesire(1).Key(), &forkMark{tid: 200, tgid: 200})
	if v := h.value(200); v != -1 {
		t.Errorf("a task outside the container holds %d after the fork pass, want -1", v)
	}
	if e.listed(fakeDesire(1).Key(), 200) {
		t.Errorf("a task the SET did not find in the container stays listed: no look again would list the container")
	}
	if entry := e.ledger.View().Entry(fakeDesire(1).Key()); entry.Has(200) {
		t.Errorf("a task outside the container keeps a ledger entry")
	}
}

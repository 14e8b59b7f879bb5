// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package nodeagent

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/numapref/numapref/internal/nodeagent/cgroups"
	"github.com/numapref/numapref/internal/nodeagent/desire"
	"github.com/numapref/numapref/internal/nodeagent/plan"
	"github.com/numapref/numapref/internal/numa"
)

// A fork event finds its container by its process (a new thread) or its creator (a new
// process). A full pass's listing replaces what was listed; a one-container pass's adds
// its processes to the others'.
func TestForkTrackerFollowsTheListings(t *testing.T) {
	f := newForkTracker(EngineConfig{})
	a, b := desire.ContainerKey{PodUID: "a", Container: "main"}, desire.ContainerKey{PodUID: "b", Container: "main"}
	listing := func(key desire.ContainerKey, tids ...int) map[desire.ContainerKey]plan.Listing {
		l := plan.Listing{Cgroup: &cgroups.Container{}}
		for _, tid := range tids {
			l.Tasks = append(l.Tasks, cgroups.TaskRef{TGID: tids[0], TID: tid})
		}
		return map[desire.ContainerKey]plan.Listing{key: l}
	}
	f.noteListing(true, map[int]desire.ContainerKey{100: a}, listing(a, 100, 101))
	f.noteListing(false, map[int]desire.ContainerKey{200: b}, listing(b, 200))
	for name, tc := range map[string]struct {
		ev   numa.ProcEvent
		want desire.ContainerKey
		ok   bool
	}{
		"a thread of a's process":          {numa.ProcEvent{ParentTGID: 1, ChildTGID: 100, ChildTID: 102}, a, true},
		"a process b's created":            {numa.ProcEvent{ParentTGID: 200, ChildTGID: 300, ChildTID: 300}, b, true},
		"a process of no listed container": {numa.ProcEvent{ParentTGID: 7, ChildTGID: 8, ChildTID: 8}, desire.ContainerKey{}, false},
	} {
		if key, ok := f.containerOf(tc.ev); key != tc.want || ok != tc.ok {
			t.Errorf("%s: %v, %v; want %v, %v", name, key, ok, tc.want, tc.ok)
		}
	}
	f.noteListing(true, map[int]desire.ContainerKey{200: b}, listing(b, 200))
	if _, ok := f.containerOf(numa.ProcEvent{ChildTGID: 100}); ok {
		t.Error("a full pass that did not list a's process left it listed")
	}
	if !f.lists(b, 200) || f.lists(b, 201) {
		t.Error("the last listing of b is not what the pass listed")
	}
}

// A fork pass trusts what the container's last listing holds but the event's own task.
func TestForkTrackerTrust(t *testing.T) {
	f := newForkTracker(EngineConfig{})
	key := fakeDesire(1).Key()
	f.noteListing(true, map[int]desire.ContainerKey{100: key}, map[desire.ContainerKey]plan.Listing{key: {
		Tasks: []cgroups.TaskRef{{TGID: 100, TID: 100}, {TGID: 100, TID: 101}}}})
	if diff := cmp.Diff(map[int]bool{100: true}, f.trust(key, 101)); diff != "" {
		t.Errorf("trusted (-want +got):\n%s", diff)
	}
}

// A task a fork pass set before its own event came is reported once, when the event comes,
// and forgotten by a full pass.
func TestForkTrackerSets(t *testing.T) {
	f := newForkTracker(EngineConfig{})
	f.noteSet(101, setMark{mono: 7})
	if set, ok := f.takeSet(101); !ok || set.mono != 7 {
		t.Errorf("takeSet = %+v, %v; want the set noted", set, ok)
	}
	if _, ok := f.takeSet(101); ok {
		t.Error("a set taken twice")
	}
	f.noteSet(102, setMark{})
	f.clearSets()
	if _, ok := f.takeSet(102); ok {
		t.Error("a set outlived a full pass")
	}
}

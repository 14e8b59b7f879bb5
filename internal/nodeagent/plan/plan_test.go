// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package plan

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
	"github.com/numapref/numapref/internal/cpuset"
	"github.com/numapref/numapref/internal/nodeagent/cgroups"
	"github.com/numapref/numapref/internal/nodeagent/desire"
	"github.com/numapref/numapref/internal/nodeagent/known"
	"github.com/numapref/numapref/internal/numa"
)

// fakeHost is one container of fake tasks in one process (the first task's): a /proc
// with their start times (1000+tid ticks), the kernel's values, and cgroups listing them.
type fakeHost struct {
	proc   string
	tids   []int
	values map[int]int
}

func newFakeHost(t *testing.T, values map[int]int) *fakeHost {
	h := &fakeHost{proc: t.TempDir(), values: values}
	for tid := range values {
		h.tids = append(h.tids, tid)
		stat := fmt.Sprintf("%d (task) S 1 %d %d 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 %d 0 0\n", tid, tid, tid, 1000+tid)
		if err := os.MkdirAll(filepath.Join(h.proc, fmt.Sprint(tid)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(h.proc, fmt.Sprint(tid), "stat"), []byte(stat), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	slices.Sort(h.tids)
	return h
}

func (h *fakeHost) Resolve(ref cgroups.ContainerRef) (*cgroups.Container, error) {
	return &cgroups.Container{Ref: ref, Path: "/fake"}, nil
}

func (h *fakeHost) ListTIDs(*cgroups.Container) ([]cgroups.TaskRef, error) {
	var out []cgroups.TaskRef
	for _, tid := range h.tids {
		out = append(out, cgroups.TaskRef{TGID: h.tids[0], TID: tid})
	}
	return out, nil
}

func (h *fakeHost) Cpuset(*cgroups.Container) (cpuset.Cpuset, error) { return cpuset.Cpuset{}, nil }

func (h *fakeHost) Get(tid int) (int, error) {
	v, ok := h.values[tid]
	if !ok {
		return 0, unix.ESRCH
	}
	return v, nil
}

func noPIDFDs(tid, _ int) (TaskHandle, error) {
	return nil, fmt.Errorf("task %d: %w", tid, numa.ErrNoPIDFD)
}

var (
	mainKey  = desire.ContainerKey{PodUID: "pod", Container: "main"}
	goneKey  = desire.ContainerKey{PodUID: "gone", Container: "main"}
	mainRef  = cgroups.ContainerRef{PodUID: "pod", ContainerID: "containerd://x"}
	mainWant = desire.Desire{PodUID: "pod", Container: "main", Node: 1, Ref: mainRef}
)

// input is the input of a pass on h, whose ledger knows l, for mainWant.
func (h *fakeHost) input(l known.Containers) Input {
	return Input{
		Desired: map[desire.ContainerKey]desire.Desire{mainKey: mainWant}, Known: known.NewView(l),
		Topology: NewTopology([]int{0, 1}, nil), Kernel: h, Cgroups: h, ProcRoot: h.proc,
		Support: numa.Support{Supported: true}, MaxTasks: 100, IDs: NewIdentifier(h.proc, noPIDFDs, 0),
	}
}

// A full pass plans the SET of each task without the node, records it ahead, forgets the
// tasks gone, counts the ones that have it, and undoes the containers no longer desired;
// it lists the processes it read. It changes nothing it was given.
func TestFullPlansSetsEntriesAndUndos(t *testing.T) {
	h := newFakeHost(t, map[int]int{100: 1, 101: -1, 102: 0})
	l := known.Containers{
		mainKey: {PodUID: "pod", Container: "main", Ref: mainRef, Tasks: map[int]*known.Task{
			100: {Start: 1100, Prev: -1, Values: []int{1}}, 99: {Start: 1099, Prev: -1, Values: []int{1}}}},
		goneKey: {PodUID: "gone", Container: "main", Tasks: map[int]*known.Task{}},
	}
	before := l.Clone()
	pl := Full(h.input(l))
	if diff := cmp.Diff(before, l); diff != "" {
		t.Errorf("planning changed the ledger (-before +after):\n%s", diff)
	}
	if len(pl.Containers) != 1 || !slices.Equal(pl.Orphans, []desire.ContainerKey{goneKey}) {
		t.Fatalf("plan of %d containers, orphans %v; want one, and %v", len(pl.Containers), pl.Orphans, goneKey)
	}
	cp := pl.Containers[0]
	if cp.Result.Reason != numav1.ReasonApplied || cp.Result.Tasks != 1 || cp.Undo {
		t.Errorf("result %+v, undo %v; want Applied with the one task that has node 1", cp.Result, cp.Undo)
	}
	var sets []int
	for _, s := range cp.Sets {
		sets = append(sets, s.Task.TID)
	}
	if !slices.Equal(sets, []int{101, 102}) {
		t.Errorf("SETs of %v, want 101 and 102", sets)
	}
	want := &known.Change{Ref: mainRef, Put: map[int]*known.Task{
		101: {Start: 1101, Prev: -1, Values: []int{1}}, 102: {Start: 1102, Prev: 0, Values: []int{1}}}, Forget: []int{99}}
	if diff := cmp.Diff(want, cp.Entry); diff != "" {
		t.Errorf("ledger change (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[int]desire.ContainerKey{100: mainKey}, pl.TGIDs); diff != "" {
		t.Errorf("processes listed (-want +got):\n%s", diff)
	}
	if !pl.Resolved || pl.ChoicesChanged {
		t.Errorf("a full pass resolved %v, changed the choices %v; want resolved, unchanged", pl.Resolved, pl.ChoicesChanged)
	}
}

// A fork pass trusts the tasks the engine says it applied: no GET of them, and the new
// one planned.
func TestOneTrustsWhatItIsTold(t *testing.T) {
	h := newFakeHost(t, map[int]int{100: 1, 101: -1})
	l := known.Containers{mainKey: {PodUID: "pod", Container: "main", Ref: mainRef, Tasks: map[int]*known.Task{
		100: {Start: 1100, Prev: -1, Values: []int{1}}}}}
	h.values[100] = 0 // a GET of it would plan a SET
	pl := One(h.input(l), mainKey, map[int]bool{100: true})
	if r := pl.Containers[0].Result; r.Tasks != 1 || len(pl.Containers[0].Sets) != 1 || pl.Containers[0].Sets[0].Task.TID != 101 {
		t.Errorf("result %+v with SETs %+v; want the trusted task counted, unread, and one SET, of 101", r, pl.Containers[0].Sets)
	}
	if pl.Resolved {
		t.Error("a Static container's pass resolved the automatic modes")
	}
}

// The task a fork event names, known and holding the agent's value, has its start time
// read: a reused tid that inherited the value gets its own entry. Without the event, or
// the engine asking to verify starts, it is taken as known.
func TestOneReadsTheEventsTask(t *testing.T) {
	h := newFakeHost(t, map[int]int{100: 1})
	l := known.Containers{mainKey: {PodUID: "pod", Container: "main", Ref: mainRef, Tasks: map[int]*known.Task{
		100: {Start: 900, Prev: -1, Values: []int{1}}}}} // the task before the one holding tid 100
	for name, tc := range map[string]struct {
		forkTID int
		verify  bool
		refresh bool
	}{
		"another task's event": {forkTID: 101},
		"its own event":        {forkTID: 100, refresh: true},
		"starts verified":      {verify: true, refresh: true},
	} {
		in := h.input(l)
		in.ForkTID, in.VerifyStarts = tc.forkTID, tc.verify
		cp := One(in, mainKey, nil).Containers[0]
		refreshed := cp.Entry != nil && cp.Entry.Put[100] != nil && cp.Entry.Put[100].Start == 1100
		if refreshed != tc.refresh || cp.Result.Tasks != 1 {
			t.Errorf("%s: entry change %+v, %d tasks; want refreshed %v and the task counted", name, cp.Entry, cp.Result.Tasks, tc.refresh)
		}
	}
}

// plannedEntry never records as the value to restore one the agent set on that tid.
func TestPlannedEntryNeverTakesOwnValueAsPrev(t *testing.T) {
	tests := map[string]struct {
		had   *known.Task
		start uint64
		v     int
		want  *known.Task
	}{
		"new task":                 {nil, 7, 3, &known.Task{Start: 7, Prev: 3, Values: []int{1}}},
		"same task, node added":    {&known.Task{Start: 7, Prev: -1, Values: []int{0}}, 7, 0, &known.Task{Start: 7, Prev: -1, Values: []int{0, 1}}},
		"same task, node recorded": {&known.Task{Start: 7, Prev: -1, Values: []int{0, 1}}, 7, 0, nil},
		"reused tid holding the agent's older value": {&known.Task{Start: 7, Prev: -1, Values: []int{0}}, 9, 0,
			&known.Task{Start: 9, Prev: -1, Values: []int{1}}},
		"reused tid holding its own value": {&known.Task{Start: 7, Prev: -1, Values: []int{0}}, 9, 2,
			&known.Task{Start: 9, Prev: 2, Values: []int{1}}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, plannedEntry(tc.had, tc.start, tc.v, 1)); diff != "" {
				t.Errorf("plannedEntry (-want +got):\n%s", diff)
			}
		})
	}
}

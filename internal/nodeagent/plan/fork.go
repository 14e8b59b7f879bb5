// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package plan

import (
	"slices"

	"github.com/numapref/numapref/internal/nodeagent/cgroups"
	"github.com/numapref/numapref/internal/nodeagent/desire"
	"github.com/numapref/numapref/internal/nodeagent/known"
)

// Fork plans a fork pass from its event alone: task t is new in container key (the
// event names it, its process and its creator, whose container the last listing knows),
// and the container's last pass, whose result is last and listing listed, applied every
// task it listed. Nothing else is read of the container: not its cgroup, its cpuset or
// its tasks, only what the event leaves out of t (its value and its start time) and,
// before a SET, its pidfd. The plan's listing is listed with t added; the engine's
// bracket checks that t is in the container around its SET. ok is false when the plan
// cannot be made so (the ledger has no entry of the container under this desire, or t
// would take it past its share): a pass that lists the container decides then. The plan's
// TGIDs name t's process.
func Fork(in Input, key desire.ContainerKey, last Result, listed Listing, t cgroups.TaskRef) (Plan, bool) {
	d := last.Desire
	if len(listed.Tasks) >= in.MaxTasks || listed.Cgroup == nil {
		return Plan{}, false
	}
	cp := ContainerPlan{Key: key, Result: last}
	r := &cp.Result
	r.Failed = map[string]int{}
	before := listed
	if !listedTask(listed, t.TID) {
		listed.Tasks = append(append(make([]cgroups.TaskRef, 0, len(listed.Tasks)+1), listed.Tasks...), t)
	} else if in.Support.Supported {
		r.Tasks-- // counted as the task that had its tid before: it is judged again
	}
	cp.Listing = &listed
	out := Plan{Containers: []ContainerPlan{cp}, TGIDs: map[int]desire.ContainerKey{t.TGID: key}}
	if !in.Support.Supported {
		return out, true // the memory policy alone, which a fork inherits: nothing to set
	}
	entry := in.Known.Entry(key)
	if !entry.Exists() || entry.Ref() != d.Ref {
		return Plan{}, false
	}
	pl := newPlanner(&in)
	te, task, has := pl.planTask(t, r.Node, entry, r.Failed)
	if te != nil {
		cp.Entry = &known.Change{Ref: d.Ref, Put: map[int]*known.Task{t.TID: te}}
	}
	switch {
	case has:
		r.Tasks++
	case task != nil:
		cp.Sets = []PendingSet{{Key: key, Cgroup: listed.Cgroup, Task: *task, Node: r.Node}}
	case len(r.Failed) == 0:
		cp.Listing = &before // it exited already
	}
	out.Containers[0] = cp
	return out, true
}

// listedTask says whether listing l holds task tid.
func listedTask(l Listing, tid int) bool {
	return slices.ContainsFunc(l.Tasks, func(t cgroups.TaskRef) bool { return t.TID == tid })
}

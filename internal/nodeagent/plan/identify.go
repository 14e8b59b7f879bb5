// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package plan

import (
	"errors"
	"fmt"

	"github.com/numapref/numapref/internal/nodeagent/cgroups"
	"github.com/numapref/numapref/internal/numa"
)

// The prctl names its target by id, and an id is given to a new task once its task is
// gone: between listing a container and its SET a task can exit and a stranger take its
// id. So a task to SET is identified once it is listed: a pidfd where the kernel gives one
// (it can never come to name another task) and the start time. The engine checks both
// around the SET (its bracket). Opening a pidfd sets nothing, so planning does it.

// TaskHandle is a handle on one task that never names another: a pidfd.
type TaskHandle interface {
	// Alive reports whether the task still runs, and so still holds its id.
	Alive() (bool, error)
	Close() error
}

// PIDFDOpener opens a TaskHandle on task tid of process tgid. An error wrapping
// numa.ErrTaskGone means the task is gone; any other, that it has no handle (its start
// time then identifies it alone).
type PIDFDOpener func(tid, tgid int) (TaskHandle, error)

// OpenPIDFD is the host's PIDFDOpener: numa.OpenPIDFD.
func OpenPIDFD(tid, tgid int) (TaskHandle, error) {
	p, err := numa.OpenPIDFD(tid, tgid)
	if err != nil {
		return nil, err
	}
	return p, nil
}

// HeldTask is a task identified for a SET: its id and start time (what the ledger
// records) and, where the kernel gives one, its pidfd.
type HeldTask struct {
	numa.Task
	pidfd TaskHandle // nil: the start time alone identifies the task
	slot  int        // the pidfd's in its identifier
}

// Holds reports whether the task's id still names the task identified: its pidfd is alive
// or, without one, /proc/<tid>/stat shows its start time (to the clock tick).
func (h HeldTask) Holds(procRoot string) bool {
	if h.pidfd != nil {
		alive, err := h.pidfd.Alive()
		return err == nil && alive
	}
	return h.Verify(procRoot) == nil
}

// PIDFDBound bounds the pidfds a pass holds at once, from the soft limit of open files:
// half of it, so that the pass's own reads of /proc and cgroup files never run short.
// Tasks past the bound are identified by start time alone.
func PIDFDBound() int {
	lim, err := numa.OpenFilesLimit()
	if err != nil {
		return 0
	}
	return int(min(lim/2, 1<<20))
}

// Identifier identifies the tasks of one pass and holds their pidfds, at most max at once,
// until they are released.
type Identifier struct {
	procRoot string
	handles  PIDFDOpener
	max      int
	// slots are the pidfds opened (HeldTask.slot), nil once released; open counts the others.
	slots []TaskHandle
	open  int
}

// NewIdentifier is the identifier of a pass: it reads start times under procRoot and
// opens at most max pidfds at once with handles.
func NewIdentifier(procRoot string, handles PIDFDOpener, max int) *Identifier {
	return &Identifier{procRoot: procRoot, handles: handles, max: max}
}

// Identify identifies listed task ref. Its start time is read after its pidfd is opened
// and confirmed alive after, so it is the pidfd's task's. An error means the task is gone.
func (ids *Identifier) Identify(ref cgroups.TaskRef) (HeldTask, error) {
	var h TaskHandle
	slot := -1
	if ids.open < ids.max {
		var err error
		h, err = ids.handles(ref.TID, ref.TGID)
		if errors.Is(err, numa.ErrTaskGone) {
			return HeldTask{}, err
		}
		if h != nil {
			slot = len(ids.slots)
			ids.slots = append(ids.slots, h)
			ids.open++
		}
	}
	task, err := numa.ReadTask(ids.procRoot, ref.TID)
	held := HeldTask{Task: task, pidfd: h, slot: slot}
	if err == nil && !held.Holds(ids.procRoot) {
		err = fmt.Errorf("identifying task %d: %w", ref.TID, numa.ErrTaskGone)
	}
	if err != nil {
		ids.Release(held)
		return HeldTask{}, err
	}
	return held, nil
}

// Release closes the task's pidfd, if it has one.
func (ids *Identifier) Release(h HeldTask) {
	if h.pidfd != nil && ids.slots[h.slot] != nil {
		h.pidfd.Close()
		ids.slots[h.slot] = nil
		ids.open--
	}
}

// ReleaseAll closes every pidfd still open: the pass is over.
func (ids *Identifier) ReleaseAll() {
	for _, h := range ids.slots {
		if h != nil {
			h.Close()
		}
	}
	ids.slots, ids.open = nil, 0
}

// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package nodeagent

import (
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/numapref/numapref/internal/nodeagent/cgroups"
	"github.com/numapref/numapref/internal/nodeagent/desire"
	"github.com/numapref/numapref/internal/nodeagent/plan"
	"github.com/numapref/numapref/internal/numa"
)

// The prctl names its target by id, and an id is given to a new task once its task is
// gone: between listing a container and its SET a task can exit and a stranger take its
// id. So every SET, of a pass and of undo, is bracketed. The task is identified once it is
// listed (plan.Identifier: a pidfd where the kernel gives one, which can never come to
// name another task, and the start time). Before the SET the container's cgroups are listed again and the task
// must be in them and still be the one identified (its pidfd alive, or the same start
// time); after the SET, the same once more. A SET that fails the check after it may have
// hit another task: it is counted (numapref_task_sets_total{result="raced"}), logged, and
// a pass's SET is put back.
//
// Membership is read from the container's own task files (cgroups.ThreadIDs), not from a
// task's /proc/<tid>/cgroup: that names the cgroup relative to the reader's cgroup
// namespace, and on cgroup v2 the agent's container has its own.

// setBatch brackets the SETs of one container: start lists its cgroups before the first
// SET, confirm after the last. Each task's identity is checked after each listing, so a
// SET confirmed hit the task identified, and that task was in the container before and
// after it.
type setBatch struct {
	e       *Engine
	key     desire.ContainerKey
	cg      *cgroups.Container
	members []int // thread ids listed before the SETs, sorted
	listErr error // why members could not be listed (then no SET is issued)
	issued  []issuedSet
}

// issuedSet is a SET the kernel took, to be confirmed.
type issuedSet struct {
	task   plan.HeldTask
	node   int // the value set
	before int // the value read right before
	at     setMark
}

// setState is what became of one SET of a batch.
type setState int

const (
	setIssued  setState = iota // the kernel took it; confirm decides
	setSkipped                 // not issued: the task is gone, left the container, or needs none
	setRefused                 // the kernel refused the GET or the SET
)

// startSets lists key's cgroups cg for the SETs to come. Tasks of a container whose
// listing fails are skipped.
func (e *Engine) startSets(key desire.ContainerKey, cg *cgroups.Container) *setBatch {
	b := &setBatch{e: e, key: key, cg: cg}
	tids, err := e.cfg.Resolver.ThreadIDs(cg)
	if err != nil {
		e.cfg.Log.V(2).Info("Listing the container before its SETs failed; none is issued", "container", key.String(), "error", err.Error())
		b.listErr = err
		return b
	}
	b.members = tids
	return b
}

// set issues SET(task, node) if task is still in the container and still the task
// identified. want, when not nil, decides from the task's current value whether the SET
// is needed at all. An error comes with setRefused.
func (b *setBatch) set(task plan.HeldTask, node int, want func(before int) bool) (setState, error) {
	e := b.e
	if _, in := slices.BinarySearch(b.members, task.TID); !in {
		return setSkipped, nil
	}
	before, err := e.cfg.Kernel.Get(task.TID)
	switch {
	case numa.IsTaskGone(err):
		return setSkipped, nil
	case err != nil:
		return setRefused, fmt.Errorf("reading preferred node of task %d: %w", task.TID, err)
	case want != nil && !want(before):
		return setSkipped, nil
	case !task.Holds(e.cfg.ProcRoot): // after the listing and the GET: both were of this task
		return setSkipped, nil
	}
	if e.cfg.hooks.beforeSet != nil {
		e.cfg.hooks.beforeSet(task.TID)
	}
	err = e.cfg.Kernel.Set(task.TID, node)
	switch {
	case numa.IsTaskGone(err):
		return setSkipped, nil
	case err != nil:
		return setRefused, fmt.Errorf("setting preferred node %d of task %d: %w", node, task.TID, err)
	}
	b.issued = append(b.issued, issuedSet{task: task, node: node, before: before, at: e.markSet()})
	return setIssued, nil
}

// confirm lists the container again and returns the issued SETs whose task is still in
// it and still the one identified, and the others: those raced. Raced ones are counted and
// logged and, with putBack, the task that now has the id gets back the value read before
// the SET, if it holds the one the SET left.
func (b *setBatch) confirm(putBack bool) (confirmed, raced []issuedSet) {
	e := b.e
	if len(b.issued) == 0 {
		return nil, nil
	}
	procRoot := e.cfg.ProcRoot
	tids, err := e.cfg.Resolver.ThreadIDs(b.cg) // unreadable: nothing is confirmed
	for _, s := range b.issued {
		if _, in := slices.BinarySearch(tids, s.task.TID); err == nil && in && s.task.Holds(procRoot) {
			confirmed = append(confirmed, s)
			continue
		}
		raced = append(raced, s)
		e.cfg.Metrics.reportSet(resultRaced)
		if !putBack {
			e.cfg.Log.Info("An undo SET raced with its task: the task exited or left its container around it, so the value may have gone to another task; an undo SET is not put back",
				"container", b.key.String(), "tid", s.task.TID, "node", s.node)
			continue
		}
		e.cfg.Log.Info("A SET raced with its task: the task exited or left its container around it, so the value may have gone to another task; putting back the value read before it",
			"container", b.key.String(), "tid", s.task.TID, "node", s.node, "putBack", s.before)
		if err := e.putBack(s); err != nil {
			e.cfg.Log.Error(err, "Putting back a raced SET", "container", b.key.String(), "tid", s.task.TID)
		}
	}
	b.issued = nil
	return confirmed, raced
}

// putBack gives the task that now has raced SET s's id the value read before the SET, if
// it holds the value the SET left: the task identified, when it is still alive (it only
// left the container), or else whichever task took its id.
func (e *Engine) putBack(s issuedSet) error {
	procRoot := e.cfg.ProcRoot
	target := s.task
	if !target.Holds(procRoot) {
		task, err := numa.ReadTask(procRoot, s.task.TID)
		if err != nil {
			return nil // gone as well: nothing holds the value
		}
		target = plan.HeldTask{Task: task}
	}
	v, err := e.cfg.Kernel.Get(target.TID)
	switch {
	case numa.IsTaskGone(err):
		return nil
	case err != nil:
		return fmt.Errorf("reading preferred node of task %d: %w", target.TID, err)
	case v != s.node:
		return nil // not the value the SET left: another SET since, or never this task's
	}
	if err := e.cfg.Kernel.Set(target.TID, s.before); err != nil && !numa.IsTaskGone(err) {
		return fmt.Errorf("putting back preferred node %d of task %d: %w", s.before, target.TID, err)
	}
	if !target.Holds(procRoot) {
		return fmt.Errorf("task %d changed again while its value was put back", target.TID)
	}
	return nil
}

// resultRaced is the result of a SET that failed its check after the call.
const resultRaced = "raced"

// engineHooks are test seams: functions a pass calls at fixed points, so a test can force
// a race into a window. Nil ones are not called.
type engineHooks struct {
	// afterWriteAhead runs after a pass's write-ahead ledger write, before its first SET.
	afterWriteAhead func()
	// beforeSet runs right before the kernel SET of tid, after the checks before it.
	beforeSet func(tid int)
	// journalStep runs at the steps of a ledger write (ledger.Options.Step).
	journalStep func(step string, f *os.File, frame []byte)
	// betweenReads runs in a pass of kind between its reading of the ledger and its
	// reading of the desire (newPass).
	betweenReads func(kind passKind)
	// beforeApply runs in a pass of kind between its plan and its apply (finish).
	beforeApply func(kind passKind)
	// forkSet runs when a fork pass set the task of its own event: the lag since the
	// kernel's timestamp of the event (0 without one) and the stages of forkStageNames
	// (ok false without them), as numapref_fork_apply_{lag,stage}_seconds observe them.
	forkSet func(sinceEvent time.Duration, stages [6]time.Duration, ok bool)
}

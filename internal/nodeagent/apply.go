// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package nodeagent

import (
	"errors"
	"fmt"
	"slices"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
	"github.com/numapref/numapref/internal/nodeagent/cgroups"
	"github.com/numapref/numapref/internal/nodeagent/desire"
	"github.com/numapref/numapref/internal/nodeagent/known"
	"github.com/numapref/numapref/internal/nodeagent/plan"
	"github.com/numapref/numapref/internal/numa"
)

// apply does what pass p planned: it takes the plan's results and listings, undoes the
// containers to undo, records the planned ledger entries, and issues the SETs once the
// ledger names their values on disk (write-ahead).
func (e *Engine) apply(p *pass, pl plan.Plan) {
	var sets []plan.PendingSet
	undos := pl.Orphans
	for _, cp := range pl.Containers {
		p.results[cp.Key] = cp.Result
		if cp.Listing != nil {
			p.listing[cp.Key] = *cp.Listing
		} else {
			delete(p.listing, cp.Key)
		}
		if cp.Undo {
			undos = append(undos, cp.Key)
		}
		if cp.Entry != nil && e.ledger.Record(cp.Key, *cp.Entry) {
			e.cfg.Log.V(1).Info("Container runs again under a new ID", "container", cp.Key.String(), "id", cp.Entry.Ref.ContainerID)
			e.placements.forgetPlaced(cp.Key) // the container runs again, under a new ID: its placement is judged again
		}
		sets = append(sets, cp.Sets...)
	}
	for _, key := range undos {
		e.undo(p.ids, key, p.known.Entry(key))
	}
	// The ledger must name a value before the value is set (write-ahead). Every other
	// change (tasks that inherited the value, tasks gone, outcomes of the SETs) waits for
	// the next full pass: undo also restores inherited tasks and skips gone ones, so a
	// crash before then loses nothing, and a fork costs one ledger write, not three.
	saved := e.writeAheadAndSet(p, sets)
	e.publishPlaced(p, pl)
	if saved && p.kind == passFull && e.ledger.Dirty() {
		if err := e.ledger.Write(); err != nil {
			e.ledgerFailed(err)
		}
	}
}

// writeAheadAndSet writes the ledger and then issues sets. A pass whose write ahead fails
// issues none of its SETs (its containers report LedgerError): a value set without its
// ledger entry could not be undone after a crash. It reports whether the write succeeded.
func (e *Engine) writeAheadAndSet(p *pass, sets []plan.PendingSet) bool {
	if len(sets) == 0 {
		return true
	}
	if err := e.ledger.Write(); err != nil {
		e.ledgerFailed(err)
		skipUnrecorded(sets, p.results, err)
		return false
	}
	if p.fork != nil {
		p.fork.writtenAhead = e.cfg.Clock.Now()
	}
	if e.cfg.hooks.afterWriteAhead != nil {
		e.cfg.hooks.afterWriteAhead()
	}
	e.applySets(p, sets)
	return true
}

// applySets issues the SETs pass p planned, bracketed one container at a time (see
// setBatch), and settles the ledger and p's results with their outcome.
func (e *Engine) applySets(p *pass, sets []plan.PendingSet) {
	for len(sets) > 0 {
		n := 1 // planning appends a container's SETs together
		for n < len(sets) && sets[n].Key == sets[0].Key {
			n++
		}
		e.applyContainer(p, sets[:n])
		sets = sets[n:]
	}
	for key, r := range p.results {
		if r.Reason == numav1.ReasonApplied && len(r.Failed) > 0 {
			r.Reason = worstFailure(r.Failed)
			r.Message = fmt.Sprintf("%d tasks have NUMA node %d; the kernel refused %v", r.Tasks, r.Node, r.Failed)
			p.results[key] = r
		}
	}
}

// applyContainer issues the SETs of one container for pass p. The SET of the task a fork
// pass's event names reports the fork lag; the first SETs confirmed in a container say
// how it was placed (notePlaced).
func (e *Engine) applyContainer(p *pass, sets []plan.PendingSet) {
	key := sets[0].Key
	r := p.results[key]
	b := e.startSets(key, sets[0].Cgroup)
	for _, s := range sets {
		state, err := b.set(s.Task, s.Node, nil)
		switch {
		case state == setSkipped && b.listErr != nil:
			// The container could not be listed, so nothing says the task left: its entry
			// stays (dropped, the next pass would take the value it has, maybe one the agent
			// set, for the one to restore).
		case state == setSkipped:
			e.ledger.DropTask(key, s.Task.TID) // exited, recycled or moved out since listed: the next pass looks again
			p.unlist(key, s.Task.TID)
		case state == setRefused:
			e.ledger.TakeValue(key, s.Task.TID, s.Node)
			e.cfg.Metrics.reportSet(plan.CountFailure(r.Failed, err))
		}
	}
	confirmed, raced := b.confirm(true)
	for _, s := range confirmed {
		e.ledger.Confirm(key, s.task.TID, s.node)
		r.Tasks++
		e.cfg.Metrics.reportSet(numav1.ReasonApplied)
		if p.fork != nil {
			e.noteForkSet(p.fork, s.task.TID, s.at)
		}
	}
	e.notePlaced(p, key, confirmed)
	for _, s := range raced {
		e.ledger.DropTask(key, s.task.TID) // gone or moved out; put back if it held our value
	}
	p.results[key] = r
}

// undo restores, in the container's tasks, every value the agent set that is still there,
// and forgets the container. knew is its entry as the pass read the ledger, before its
// desire: the pass undoes only that container. The start lane, which takes no pass lock,
// may have recorded and set the container since, for a start the pass's desire did not
// hold yet (the API's desire says "not running" until the kubelet reports the start): that
// is left to the next pass, which reads the start's desire.
func (e *Engine) undo(ids *plan.Identifier, key desire.ContainerKey, knew known.Entry) {
	entry, ok := e.ledger.View().Entry(key).Copy()
	if ok && (!knew.Exists() || !desire.SameContainer(knew.Ref().ContainerID, entry.Ref.ContainerID)) {
		e.cfg.Log.V(1).Info("Not undoing a container placed at its start while the pass ran", "container", key.String())
		return
	}
	e.placements.forgetPlaced(key) // placed again later, it is judged again
	if !ok || !e.cfg.Support.Supported {
		return // nothing set, or no kernel to read: the entry stays for a kernel that can
	}
	cg, err := e.cfg.Resolver.Resolve(entry.Ref)
	if errors.Is(err, cgroups.ErrContainerNotFound) {
		e.ledger.Forget(key) // the cgroup is gone, and its tasks with it
		return
	}
	if err != nil {
		e.cfg.Log.Error(err, "Resolving container to undo", "container", key.String())
		return
	}
	switch keep, end := e.restoreAll(ids, key, cg, entry); end {
	case undoDone:
		e.ledger.Forget(key)
	case undoKeep:
		e.ledger.KeepTasks(key, keep)
	}
}

// undoEnd is how an undo's restoring ended.
type undoEnd int

const (
	undoDone      undoEnd = iota // every task restored, or the cgroup gone: the entry is forgotten
	undoKeep                     // the kernel refused some tasks: the entry keeps them alone
	undoUnchanged                // not finished, or the container not listed: the entry stays as it is
)

// restoreAll restores the tasks of container key, being undone, listing it again after
// each round: a task still holding the agent's value may create a thread while undo runs,
// and the thread inherits the value. It ends when a listing shows no task it has not seen.
// If the container keeps growing, or the kernel refused some tasks (keep), the entry stays
// for the next pass instead of being forgotten with forced tasks in it.
func (e *Engine) restoreAll(ids *plan.Identifier, key desire.ContainerKey, cg *cgroups.Container, entry *known.Container) (keep map[int]*known.Task, end undoEnd) {
	var ours []int
	for _, te := range entry.Tasks {
		ours = append(ours, te.Values...)
	}
	seen := map[int]bool{}
	remaining := map[int]*known.Task{}
	const maxRounds = 4
	for round := 0; ; round++ {
		fresh, err := e.unseenTasks(cg, seen)
		if errors.Is(err, cgroups.ErrContainerNotFound) {
			return nil, undoDone
		}
		if err != nil {
			e.cfg.Log.Error(err, "Listing tasks to undo", "container", key.String())
			return nil, undoUnchanged
		}
		if len(fresh) == 0 {
			break
		}
		e.restoreListed(ids, key, cg, entry, fresh, ours, remaining)
		if round == maxRounds {
			e.cfg.Log.Info("Container keeps creating tasks during undo; finishing next pass", "container", key.String())
			return nil, undoUnchanged
		}
	}
	if len(remaining) > 0 {
		return remaining, undoKeep
	}
	return nil, undoDone
}

// unseenTasks lists cg's tasks that are not in seen, and adds them to it.
func (e *Engine) unseenTasks(cg *cgroups.Container, seen map[int]bool) ([]cgroups.TaskRef, error) {
	tids, err := e.cfg.Resolver.ListTIDs(cg)
	if err != nil {
		return nil, err
	}
	var fresh []cgroups.TaskRef
	for _, t := range tids {
		if !seen[t.TID] {
			seen[t.TID] = true
			fresh = append(fresh, t)
		}
	}
	return fresh, nil
}

// restoreListed puts back, in the listed tasks refs of a container being undone, the value
// each had before the agent set it, when it still holds a value the agent set. A task the
// ledger does not know, or knows under another start time (its tid was reused), was born
// since the pass that recorded it: a thread or CLONE_VM child in the container that
// inherited the value from a task the agent set. It is restored to no node too, or it
// would keep the value for ever. Tasks the kernel refused go to remaining, to be tried
// again.
func (e *Engine) restoreListed(ids *plan.Identifier, key desire.ContainerKey, cg *cgroups.Container, entry *known.Container, refs []cgroups.TaskRef, ours []int, remaining map[int]*known.Task) {
	targets := identifyRestores(ids, entry, refs, ours)
	b := e.startSets(key, cg) // after identifying: the listing is of the tasks identified
	for _, t := range targets {
		// Only a value the agent set is undone: one the application chose since is left.
		state, err := b.set(t.task, t.te.Prev, func(v int) bool { return slices.Contains(t.te.Values, v) })
		if state == setRefused {
			e.cfg.Log.Error(err, "Undoing preferred node", "container", key.String(), "tid", t.task.TID)
			remaining[t.task.TID] = t.te // kept to retry
		}
	}
	confirmed, _ := b.confirm(false)
	for range confirmed {
		e.cfg.Metrics.reportRestore()
	}
	for _, t := range targets {
		ids.Release(t.task)
	}
}

// restoreTarget is a task an undo restores, and its ledger entry.
type restoreTarget struct {
	task plan.HeldTask
	te   *known.Task
}

// identifyRestores identifies the listed tasks refs of entry's container, each with its
// entry, or an inheritor's (no node before, any of ours set).
func identifyRestores(ids *plan.Identifier, entry *known.Container, refs []cgroups.TaskRef, ours []int) []restoreTarget {
	var targets []restoreTarget
	for _, ref := range refs {
		task, err := ids.Identify(ref)
		if err != nil {
			continue // gone
		}
		te := entry.Tasks[ref.TID]
		if te == nil || te.Start != task.StartTime {
			te = &known.Task{Start: task.StartTime, Prev: numa.NoNode, Values: ours} // an inheritor
		}
		targets = append(targets, restoreTarget{task, te})
	}
	return targets
}

// worstFailure is the reason a container reports when the kernel refused some of its
// tasks: PermissionDenied over KernelError.
func worstFailure(failed map[string]int) string {
	if failed[numav1.ReasonPermissionDenied] > 0 {
		return numav1.ReasonPermissionDenied
	}
	return numav1.ReasonKernelError
}

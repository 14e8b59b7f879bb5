package nodeagent

import (
	"errors"
	"fmt"
	"maps"
	"slices"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
	"github.com/numapref/numapref/internal/nodeagent/cgroups"
	"github.com/numapref/numapref/internal/numa"
)

// pendingSet is a kernel SET the pass decided on: of node, on task of the container key
// whose cgroups are cg. The task's pidfd, if any, stays open until the pass ends.
type pendingSet struct {
	key  ContainerKey
	cg   *cgroups.Container
	task heldTask
	node int
}

// apply does what pass p planned: it takes the plan's results and listings, undoes the
// containers to undo, records the planned ledger entries, and issues the SETs once the
// ledger names their values on disk (write-ahead).
func (e *Engine) apply(p *pass, pl plan) {
	var sets []pendingSet
	dirty := false
	undos := pl.orphans
	for _, cp := range pl.containers {
		p.results[cp.key] = cp.result
		if cp.listing != nil {
			p.listing[cp.key] = *cp.listing
		} else {
			delete(p.listing, cp.key)
		}
		if cp.undo {
			undos = append(undos, cp.key)
		}
		if cp.entry != nil {
			e.record(cp.key, cp.entry)
			dirty = true
		}
		sets = append(sets, cp.sets...)
	}
	for _, key := range undos {
		dirty = e.undo(p.ids, key) || dirty
	}
	// The ledger must name a value before the value is set (write-ahead). Every other
	// change (tasks that inherited the value, tasks gone, outcomes of the SETs) waits for
	// the next full pass: undo also restores inherited tasks and skips gone ones, so a
	// crash before then loses nothing, and a fork costs one ledger write, not three.
	e.ledgerDirty = e.ledgerDirty || dirty
	saved := e.writeAheadAndSet(p, sets)
	e.publishPlaced(p, pl)
	if saved && p.full() && e.ledgerDirty {
		if err := e.saveLedger(); err != nil {
			e.ledgerFailed(err)
		} else {
			e.ledgerDirty = false
		}
	}
}

// writeAheadAndSet writes the ledger and then issues sets. A pass whose write ahead fails
// issues none of its SETs (its containers report LedgerError): a value set without its
// ledger entry could not be undone after a crash. It reports whether the write succeeded.
func (e *Engine) writeAheadAndSet(p *pass, sets []pendingSet) bool {
	if len(sets) == 0 {
		return true
	}
	defer func() { e.ledgerDirty = true }() // the outcomes of the SETs
	if err := e.saveLedger(); err != nil {
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

// record makes a planned change to the ledger entry of container key.
func (e *Engine) record(key ContainerKey, c *entryChange) {
	e.touch(key)
	entry := e.ledger[key]
	if entry == nil {
		entry = &containerEntry{PodUID: string(key.PodUID), Container: key.Container, Tasks: map[int]*taskEntry{}}
		e.ledger[key] = entry
	} else if entry.Ref.ContainerID != c.ref.ContainerID && !sameContainer(entry.Ref.ContainerID, c.ref.ContainerID) {
		e.forgetPlaced(key) // the container runs again, under a new ID: its placement is judged again
	}
	entry.Ref = c.ref
	maps.Copy(entry.Tasks, c.record)
	for _, tid := range c.forget {
		delete(entry.Tasks, tid)
	}
}

// applySets issues the SETs pass p planned, bracketed one container at a time (see
// setBatch), and settles the ledger and p's results with their outcome.
func (e *Engine) applySets(p *pass, sets []pendingSet) {
	for len(sets) > 0 {
		n := 1 // planContainer appends a container's SETs together
		for n < len(sets) && sets[n].key == sets[0].key {
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
func (e *Engine) applyContainer(p *pass, sets []pendingSet) {
	key := sets[0].key
	r := p.results[key]
	e.touch(key)
	tasks := e.ledger[key].Tasks
	b := e.startSets(key, sets[0].cg)
	for _, s := range sets {
		state, err := b.set(s.task, s.node, nil)
		switch {
		case state == setSkipped && b.listErr != nil:
			// The container could not be listed, so nothing says the task left: its entry
			// stays (dropped, the next pass would take the value it has, maybe one the agent
			// set, for the one to restore).
		case state == setSkipped:
			delete(tasks, s.task.TID) // exited, recycled or moved out since listed: the next pass looks again
		case state == setRefused:
			t := tasks[s.task.TID]
			t.Values = slices.DeleteFunc(t.Values, func(v int) bool { return v == s.node })
			e.cfg.Metrics.reportSet(countFailure(r.Failed, err))
		}
	}
	confirmed, raced := b.confirm(true)
	for _, s := range confirmed {
		tasks[s.task.TID].Values = []int{s.node}
		r.Tasks++
		e.cfg.Metrics.reportSet(numav1.ReasonApplied)
		if p.fork != nil {
			e.noteForkSet(p.fork, s.task.TID, s.at)
		}
	}
	e.notePlaced(p, key, confirmed)
	for _, s := range raced {
		delete(tasks, s.task.TID) // gone or moved out; put back if it held our value
	}
	p.results[key] = r
}

// undo restores, in the container's tasks, every value the agent set that is still there,
// and forgets the container. It reports whether the ledger changed.
func (e *Engine) undo(ids *identifier, key ContainerKey) bool {
	e.forgetPlaced(key) // placed again later, it is judged again
	entry := e.ledger[key]
	if entry == nil {
		return false
	}
	e.touch(key)
	if !e.cfg.Support.Supported {
		return false // cannot read the kernel: keep the entry for a kernel that can
	}
	cg, err := e.cfg.Resolver.Resolve(entry.ref())
	if errors.Is(err, cgroups.ErrContainerNotFound) {
		delete(e.ledger, key) // the cgroup is gone, and its tasks with it
		return true
	}
	if err != nil {
		e.cfg.Log.Error(err, "Resolving container to undo", "container", key.String())
		return false
	}
	done, ok := e.restoreAll(ids, key, cg, entry)
	if !ok {
		return false
	}
	if done {
		delete(e.ledger, key)
	}
	return true
}

// restoreAll restores the tasks of container key, being undone, listing it again after
// each round: a task still holding the agent's value may create a thread while undo runs,
// and the thread inherits the value. It ends when a listing shows no task it has not seen.
// done says the entry may be forgotten (every task restored, or the cgroup gone); if the
// container keeps growing, or the kernel refused some tasks, the entry stays for the next
// pass (holding the refused ones) instead of being forgotten with forced tasks in it. ok
// is false when the container could not be listed: nothing changed.
func (e *Engine) restoreAll(ids *identifier, key ContainerKey, cg *cgroups.Container, entry *containerEntry) (done, ok bool) {
	var ours []int
	for _, te := range entry.Tasks {
		ours = append(ours, te.Values...)
	}
	seen := map[int]bool{}
	remaining := map[int]*taskEntry{}
	const maxRounds = 4
	for round := 0; ; round++ {
		tids, err := e.cfg.Resolver.ListTIDs(cg)
		if errors.Is(err, cgroups.ErrContainerNotFound) {
			return true, true
		}
		if err != nil {
			e.cfg.Log.Error(err, "Listing tasks to undo", "container", key.String())
			return false, false
		}
		var fresh []cgroups.TaskRef
		for _, t := range tids {
			if !seen[t.TID] {
				seen[t.TID] = true
				fresh = append(fresh, t)
			}
		}
		if len(fresh) == 0 {
			break
		}
		e.restoreListed(ids, key, cg, entry, fresh, ours, remaining)
		if round == maxRounds {
			e.cfg.Log.Info("Container keeps creating tasks during undo; finishing next pass", "container", key.String())
			return false, true
		}
	}
	if len(remaining) > 0 {
		entry.Tasks = remaining
		return false, true
	}
	return true, true
}

// restoreListed puts back, in the listed tasks refs of a container being undone, the value
// each had before the agent set it, when it still holds a value the agent set. A task the
// ledger does not know, or knows under another start time (its tid was reused), was born
// since the pass that recorded it: a thread or CLONE_VM child in the container that
// inherited the value from a task the agent set. It is restored to no node too, or it
// would keep the value for ever. Tasks the kernel refused go to remaining, to be tried
// again.
func (e *Engine) restoreListed(ids *identifier, key ContainerKey, cg *cgroups.Container, entry *containerEntry, refs []cgroups.TaskRef, ours []int, remaining map[int]*taskEntry) {
	type target struct {
		task heldTask
		te   *taskEntry
	}
	var targets []target
	for _, ref := range refs {
		task, err := ids.identify(ref)
		if err != nil {
			continue // gone
		}
		te := entry.Tasks[ref.TID]
		if te == nil || te.Start != task.StartTime {
			te = &taskEntry{Start: task.StartTime, Prev: numa.NoNode, Values: ours} // an inheritor
		}
		targets = append(targets, target{task, te})
	}
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
		ids.release(t.task)
	}
}

// countFailure counts a refused call by reason and returns the reason ("" for a task
// that exited since listing: normal, not a failure).
func countFailure(failed map[string]int, err error) string {
	reason := numav1.ReasonKernelError
	switch {
	case numa.IsTaskGone(err):
		return ""
	case numa.IsPermissionDenied(err):
		reason = numav1.ReasonPermissionDenied
	}
	failed[reason]++
	return reason
}

// worstFailure is the reason a container reports when the kernel refused some of its
// tasks: PermissionDenied over KernelError.
func worstFailure(failed map[string]int) string {
	if failed[numav1.ReasonPermissionDenied] > 0 {
		return numav1.ReasonPermissionDenied
	}
	return numav1.ReasonKernelError
}

package nodeagent

import (
	"errors"
	"fmt"
	"slices"

	"golang.org/x/sys/unix"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
	"github.com/numapref/numapref/internal/nodeagent/cgroups"
	"github.com/numapref/numapref/internal/numa"
)

// applySets issues the planned SETs, bracketed one container at a time (see setBatch), and
// settles the ledger with their outcome. fork, when not nil, is the fork event the pass
// runs for: the SET of its new task reports the lag.
func (e *Engine) applySets(sets []pendingSet, results map[ContainerKey]ContainerResult, fork *forkMark) {
	for len(sets) > 0 {
		n := 1 // planContainer appends a container's SETs together
		for n < len(sets) && sets[n].key == sets[0].key {
			n++
		}
		e.applyContainer(sets[:n], results, fork)
		sets = sets[n:]
	}
	for key, r := range results {
		if r.Reason == numav1.ReasonApplied && len(r.Failed) > 0 {
			r.Reason = worstFailure(r.Failed)
			r.Message = fmt.Sprintf("%d tasks have NUMA node %d; the kernel refused %v", r.Tasks, r.Node, r.Failed)
			results[key] = r
		}
	}
}

// applyContainer issues the SETs of one container.
func (e *Engine) applyContainer(sets []pendingSet, results map[ContainerKey]ContainerResult, fork *forkMark) {
	key := sets[0].key
	r := results[key]
	tasks := e.ledger[key].Tasks
	b := e.startSets(key, sets[0].cg)
	for _, s := range sets {
		state, err := b.set(s.task, s.node, nil)
		switch state {
		case setSkipped:
			delete(tasks, s.task.TID) // exited, recycled or moved out since listed: the next pass looks again
		case setRefused:
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
		if fork != nil {
			e.noteForkSet(fork, s.task.TID, s.at)
		}
	}
	for _, s := range raced {
		delete(tasks, s.task.TID) // gone or moved out; put back if it held our value
	}
	results[key] = r
}

// undo restores, in the container's tasks, every value the agent set that is still there,
// and forgets the container. It reports whether the ledger changed.
func (e *Engine) undo(key ContainerKey) bool {
	entry := e.ledger[key]
	if entry == nil {
		return false
	}
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
	var ours []int
	for _, te := range entry.Tasks {
		ours = append(ours, te.Values...)
	}
	// A task still holding the agent's value may create a thread while undo runs; the
	// thread inherits the value. So list again after restoring, until a listing shows no
	// task undo has not seen; if the container keeps growing, the entry stays for the next
	// pass instead of being forgotten with forced tasks in it.
	seen := map[int]bool{}
	remaining := map[int]*taskEntry{}
	const maxRounds = 4
	for round := 0; ; round++ {
		tids, err := e.cfg.Resolver.ListTIDs(cg)
		if errors.Is(err, cgroups.ErrContainerNotFound) {
			delete(e.ledger, key)
			return true
		}
		if err != nil {
			e.cfg.Log.Error(err, "Listing tasks to undo", "container", key.String())
			return false
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
		e.restoreListed(key, cg, entry, fresh, ours, remaining)
		if round == maxRounds {
			e.cfg.Log.Info("Container keeps creating tasks during undo; finishing next pass", "container", key.String())
			return true
		}
	}
	if len(remaining) > 0 {
		entry.Tasks = remaining
		return true
	}
	delete(e.ledger, key)
	return true
}

// restoreListed puts back, in the listed tasks refs of a container being undone, the value
// each had before the agent set it, when it is the same task (start time) and still holds a
// value the agent set. A task the ledger does not know was born since the last pass: a
// thread or CLONE_VM child that inherited the value from a task the agent set; it is
// restored too, or it would keep the value. Tasks the kernel refused go to remaining, to
// be tried again.
func (e *Engine) restoreListed(key ContainerKey, cg *cgroups.Container, entry *containerEntry, refs []cgroups.TaskRef, ours []int, remaining map[int]*taskEntry) {
	type target struct {
		task heldTask
		te   *taskEntry
	}
	var targets []target
	for _, ref := range refs {
		task, err := e.identify(ref)
		if err != nil {
			continue // gone
		}
		te := entry.Tasks[ref.TID]
		switch {
		case te == nil:
			te = &taskEntry{Start: task.StartTime, Prev: numa.NoNode, Values: ours}
		case te.Start != task.StartTime:
			e.release(task)
			continue // recycled: not the task the agent set
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
		e.release(t.task)
	}
}

// countFailure counts a refused call by reason and returns the reason ("" for a task
// that exited since listing: normal, not a failure).
func countFailure(failed map[string]int, err error) string {
	reason := numav1.ReasonKernelError
	switch {
	case errors.Is(err, unix.ESRCH):
		return ""
	case errors.Is(err, unix.EPERM), errors.Is(err, unix.EACCES):
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

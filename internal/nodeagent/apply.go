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

// applySets issues the planned SETs and settles the ledger with their outcome. fork, when
// not nil, is the fork event the pass runs for: the SET of its new task reports the lag.
func (e *Engine) applySets(sets []pendingSet, results map[ContainerKey]ContainerResult, fork *forkMark) {
	for _, s := range sets {
		r := results[s.key]
		t := e.ledger[s.key].Tasks[s.tid]
		err := e.cfg.Kernel.Set(s.tid, s.node)
		switch {
		case err == nil:
			t.Values = []int{s.node}
			r.Tasks++
			e.cfg.Metrics.reportSet(numav1.ReasonApplied)
			if fork != nil {
				e.noteForkSet(fork, s.tid)
			}
		case errors.Is(err, unix.ESRCH):
			delete(e.ledger[s.key].Tasks, s.tid) // exited before the SET
		default:
			t.Values = slices.DeleteFunc(t.Values, func(v int) bool { return v == s.node })
			e.cfg.Metrics.reportSet(countFailure(r.Failed, err))
		}
		results[s.key] = r
	}
	for key, r := range results {
		if r.Reason == numav1.ReasonApplied && len(r.Failed) > 0 {
			r.Reason = worstFailure(r.Failed)
			r.Message = fmt.Sprintf("%d tasks have NUMA node %d; the kernel refused %v", r.Tasks, r.Node, r.Failed)
			results[key] = r
		}
	}
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
		fresh := 0
		for _, t := range tids {
			if seen[t.TID] {
				continue
			}
			seen[t.TID] = true
			fresh++
			if te, err := e.restoreListed(key, entry, t.TID, ours); err != nil {
				remaining[t.TID] = te // kept to retry
			}
		}
		if fresh == 0 {
			break
		}
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

// restoreListed restores one listed task of a container being undone. A task the ledger
// does not know was born since the last pass: a thread or CLONE_VM child that inherited
// the value from a task the agent set; it is restored too, or it would keep the value.
func (e *Engine) restoreListed(key ContainerKey, entry *containerEntry, tid int, ours []int) (*taskEntry, error) {
	te := entry.Tasks[tid]
	if te == nil {
		task, err := numa.ReadTask(e.cfg.Resolver.ProcRoot(), tid)
		if err != nil {
			return nil, nil // gone
		}
		te = &taskEntry{Start: task.StartTime, Prev: numa.NoNode, Values: ours}
	}
	err := e.restore(tid, te)
	if err != nil {
		e.cfg.Log.Error(err, "Undoing preferred node", "container", key.String(), "tid", tid)
	}
	return te, err
}

// restore puts back the value a task had before the agent set it, when the task is the
// same one (start time) and still has a value the agent set.
func (e *Engine) restore(tid int, te *taskEntry) error {
	if err := te.task(tid).Verify(e.cfg.Resolver.ProcRoot()); err != nil {
		return nil // gone or recycled: not ours any more
	}
	v, err := e.cfg.Kernel.Get(tid)
	if errors.Is(err, unix.ESRCH) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading preferred node of task %d: %w", tid, err)
	}
	if !slices.Contains(te.Values, v) {
		return nil // the application chose its own value since: leave it
	}
	if err := e.cfg.Kernel.Set(tid, te.Prev); err != nil && !errors.Is(err, unix.ESRCH) {
		return fmt.Errorf("restoring preferred node %d of task %d: %w", te.Prev, tid, err)
	}
	e.cfg.Metrics.reportRestore()
	return nil
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

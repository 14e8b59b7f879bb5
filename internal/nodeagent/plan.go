package nodeagent

import (
	"errors"
	"fmt"
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

// releaseSets closes the pidfds of the pass's SETs.
func (e *Engine) releaseSets(sets []pendingSet) {
	for _, s := range sets {
		e.release(s.task)
	}
}

// planContainer reads the kernel state of one container's tasks and decides which tasks
// need a SET. New tasks get ledger entries here, before any SET is issued. trust is the
// set of tasks a fork pass need not read again (see trusted).
func (e *Engine) planContainer(key ContainerKey, d Desire, trust map[int]bool) (ContainerResult, []pendingSet, bool) {
	r := ContainerResult{Desire: d, Node: d.Node}
	// skip reports why the container gets nothing; the values set before are undone, except
	// when the host could not be read (a passing cgroup error must not churn the tasks).
	skip := func(reason, msg string) (ContainerResult, []pendingSet, bool) {
		r.Reason, r.Message = reason, msg
		delete(e.listing, key)
		if reason == numav1.ReasonCgroupError {
			return r, nil, false
		}
		return r, nil, e.undo(key)
	}
	res := e.resolved[key] // the automatic modes' choice (placement.go)
	switch {
	case d.Skip != "":
		return skip(d.Skip, d.Message)
	case !e.cfg.Support.Supported:
		return skip(numav1.ReasonKernelUnsupported, "this kernel cannot set a preferred NUMA node: "+e.cfg.Support.Reason)
	case d.Placement.Automatic() && res.skip != "":
		return skip(res.skip, res.message)
	case d.Placement.Automatic():
		r.Node, r.Why = res.node, res.why
	}
	node := r.Node
	if !e.online[node] {
		return skip(numav1.ReasonNodeNotPresent, fmt.Sprintf("NUMA node %d is not online on this host (online: %s)", node, numa.FormatList(e.cfg.OnlineNodes)))
	}
	cg, cs, err := e.cgroupOf(key, d)
	if err != nil {
		return skip(cgroupReason(err), err.Error())
	}
	if len(cs.Mems) > 0 && !slices.Contains(cs.Mems, node) {
		if tids, err := e.cfg.Resolver.ListTIDs(cg); err == nil {
			r.Skipped = len(tids) // for metrics only: a cgroup read, no kernel call
		}
		return skip(numav1.ReasonMemoryPinnedElsewhere, fmt.Sprintf("cpuset.mems of the container is %s; NUMA node %d would fight it", numa.FormatList(cs.Mems), node))
	}
	tids, err := e.cfg.Resolver.ListTIDs(cg)
	if err != nil {
		return skip(cgroupReason(err), err.Error())
	}
	e.listing[key] = containerListing{cgroup: cg, tasks: tids}

	entry := e.ledger[key]
	changed := false
	if entry == nil {
		entry = &containerEntry{PodUID: string(key.PodUID), Container: key.Container, Tasks: map[int]*taskEntry{}}
	}
	if entry.Ref != d.Ref {
		// New, or the container restarted under a new ID: undo must find this cgroup.
		entry.Ref = d.Ref
		changed = true
	}
	listed := make(map[int]bool, len(tids))
	var sets []pendingSet
	r.Failed = map[string]int{}
	for _, t := range tids {
		listed[t.TID] = true
		e.tgids[t.TGID] = key
		if trust[t.TID] && entry.Tasks[t.TID] != nil {
			r.Tasks++ // applied by the last pass (see trusted)
			continue
		}
		v, err := e.cfg.Kernel.Get(t.TID)
		if err != nil {
			countFailure(r.Failed, err)
			continue
		}
		known := entry.Tasks[t.TID]
		if v == node && known != nil {
			r.Tasks++
			continue
		}
		// A task the ledger does not know, or whose value is not ours: read its identity
		// (only here, not for every known task on every pass) before acting.
		if v == node {
			// Inherited from a thread or CLONE_VM parent the agent set: recorded for undo.
			task, err := numa.ReadTask(e.cfg.Resolver.ProcRoot(), t.TID)
			if err != nil {
				continue // exited since listing
			}
			entry.Tasks[t.TID] = &taskEntry{Start: task.StartTime, Prev: numa.NoNode, Values: []int{node}}
			changed = true
			r.Tasks++
			continue
		}
		task, err := e.identify(t) // with its pidfd, held until the SET
		if err != nil {
			continue // exited since listing
		}
		if known != nil && known.Start != task.StartTime {
			known = nil // the pid was recycled: a different task
		}
		if known == nil {
			known = &taskEntry{Start: task.StartTime, Prev: v}
			entry.Tasks[t.TID] = known
			changed = true
		}
		if !slices.Contains(known.Values, node) {
			known.Values = append(known.Values, node)
			changed = true
		}
		sets = append(sets, pendingSet{key: key, cg: cg, task: task, node: node})
	}
	for tid := range entry.Tasks {
		if !listed[tid] {
			delete(entry.Tasks, tid) // exited, or moved out of the container: never touched again
			changed = true
		}
	}
	e.ledger[key] = entry
	r.Reason = numav1.ReasonApplied
	return r, sets, changed
}

// cgroupReason is the reason a container reports when its cgroup could not be read.
func cgroupReason(err error) string {
	if errors.Is(err, cgroups.ErrContainerNotFound) {
		return numav1.ReasonContainerNotFound
	}
	return numav1.ReasonCgroupError
}

package nodeagent

import (
	"errors"
	"fmt"
	"slices"

	"github.com/go-logr/logr"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
	"github.com/numapref/numapref/internal/nodeagent/cgroups"
	"github.com/numapref/numapref/internal/numa"
)

// plan is what a pass decided: the SETs to issue and the containers to undo, with the
// ledger entries to write ahead of the SETs. apply.go does it.
type plan struct {
	containers []containerPlan
	// orphans are the ledger's containers no longer desired: undone.
	orphans []ContainerKey
}

// containerPlan is what a pass decided for one desired container.
type containerPlan struct {
	key    ContainerKey
	result ContainerResult
	// undo says the container gets nothing and what the agent set in it is undone.
	undo bool
	// listing is the cgroup and tasks read; nil when the container was skipped.
	listing *containerListing
	// entry is the change to the container's ledger entry; nil for none.
	entry *entryChange
	sets  []pendingSet
}

// entryChange is a change to one container's ledger entry: its ref, the task entries to
// write (new tasks, or known ones with a value about to be set), the tasks to forget.
type entryChange struct {
	ref    cgroups.ContainerRef
	record map[int]*taskEntry
	forget []int
}

// planner decides what a pass does. It reads the host (cgroup files, /proc, the kernel's
// GET) and the ledger and changes neither: its kernel can only GET, and it holds no
// Engine. The pass it plans for gets its listings and the pidfds of the tasks to set.
type planner struct {
	p        *pass
	kernel   numa.PreferredNodeReader
	resolver cgroupResolver
	procRoot string
	support  numa.Support
	ledger   ledger // read only
	topo     topology
	memFree  func(node int) (uint64, error)
	log      logr.Logger
	// maxTasks is one container's share of the ledger and the pidfds (taskShare).
	maxTasks int
	// verifyStarts says known tasks holding the agent's value have their start time read
	// (a reused tid that inherited the value otherwise keeps a stale ledger entry).
	verifyStarts bool
	// choices are the sticky choices, which resolve updates; resolved is every automatic
	// container's node; cgroups caches the cgroups and cpusets the pass read.
	choices  map[choiceKey]choice
	resolved map[ContainerKey]resolution
	cgroups  map[ContainerKey]hostCgroup
}

// planner makes the planner of pass p. resolved is the automatic modes' last choice (a
// fork pass's); a full pass makes its own (resolve).
func (e *Engine) planner(p *pass, resolved map[ContainerKey]resolution) *planner {
	return &planner{
		p: p, kernel: e.cfg.Kernel, resolver: e.cfg.Resolver, procRoot: e.cfg.ProcRoot, support: e.cfg.Support,
		ledger: e.ledger, topo: e.topo, memFree: e.cfg.MemFree, log: e.cfg.Log, verifyStarts: e.verifyStarts(p),
		maxTasks: e.cfg.MaxTasksPerContainer,
		choices:  e.choices, resolved: resolved, cgroups: map[ContainerKey]hostCgroup{},
	}
}

// planFull plans a full pass: every desired container, and the undo of the others.
func (pl *planner) planFull(desired map[ContainerKey]Desire) plan {
	var out plan
	for key, d := range desired {
		out.containers = append(out.containers, pl.planContainer(key, d, nil))
	}
	for key := range pl.ledger {
		if _, ok := desired[key]; !ok {
			out.orphans = append(out.orphans, key)
		}
	}
	return out
}

// planContainer reads the kernel state of one container's tasks and decides which tasks
// need a SET, and the ledger entries to write before. trust is the set of tasks a fork
// pass need not read again (see trusted).
func (pl *planner) planContainer(key ContainerKey, d Desire, trust map[int]bool) containerPlan {
	cp := containerPlan{key: key, result: ContainerResult{Desire: d, Node: d.Node}}
	cg, tids, reason, msg := pl.admit(key, d, &cp.result)
	if reason != "" {
		cp.result.Reason, cp.result.Message = reason, msg
		// What was set before is undone, except when the host could not be read: a passing
		// cgroup error must not churn the tasks.
		cp.undo = reason != numav1.ReasonCgroupError
		return cp
	}
	cp.listing = &containerListing{cgroup: cg, tasks: tids}
	pl.planTasks(&cp, d, cg, tids, trust)
	cp.result.Reason = numav1.ReasonApplied
	return cp
}

// admit decides the container's node (into r) and reads its cgroup and tasks, or returns
// the reason (and message) the container gets nothing.
func (pl *planner) admit(key ContainerKey, d Desire, r *ContainerResult) (*cgroups.Container, []cgroups.TaskRef, string, string) {
	res := pl.resolved[key] // the automatic modes' choice (placement.go)
	switch {
	case d.Refusal != "":
		return nil, nil, d.Refusal, d.Message
	case !pl.support.Supported:
		return nil, nil, numav1.ReasonKernelUnsupported, "this kernel cannot set a preferred NUMA node: " + pl.support.Reason
	case d.Placement.Automatic() && res.skip != "":
		return nil, nil, res.skip, res.message
	case d.Placement.Automatic():
		r.Node, r.Why = res.node, res.why
	}
	node := r.Node
	if !pl.topo.online[node] {
		return nil, nil, numav1.ReasonNodeNotPresent, fmt.Sprintf("NUMA node %d is not online on this host (online: %s)", node, numa.FormatList(pl.topo.nodes))
	}
	cg, cs, err := pl.cgroupOf(key, d)
	if err != nil {
		return nil, nil, cgroupReason(err), err.Error()
	}
	if len(cs.Mems) > 0 && !slices.Contains(cs.Mems, node) {
		if tids, err := pl.resolver.ListTIDs(cg); err == nil {
			r.SkippedTasks = len(tids) // for metrics only: a cgroup read, no kernel call
		}
		return nil, nil, numav1.ReasonMemoryPinnedElsewhere, fmt.Sprintf("cpuset.mems of the container is %s; NUMA node %d would fight it", numa.FormatList(cs.Mems), node)
	}
	tids, err := pl.resolver.ListTIDs(cg)
	if err != nil {
		return nil, nil, cgroupReason(err), err.Error()
	}
	if len(tids) > pl.maxTasks {
		r.SkippedTasks = len(tids)
		return nil, nil, numav1.ReasonTooManyTasks, tooManyTasks(pl.maxTasks)
	}
	return cg, tids, "", ""
}

// planTasks decides, for each listed task of a container, whether it needs a SET, and
// what its ledger entry becomes.
func (pl *planner) planTasks(cp *containerPlan, d Desire, cg *cgroups.Container, tids []cgroups.TaskRef, trust map[int]bool) {
	entry := pl.ledger[cp.key]
	var known map[int]*taskEntry
	if entry != nil {
		known = entry.Tasks
	}
	change := &entryChange{ref: d.Ref, record: map[int]*taskEntry{}}
	r := &cp.result
	r.Failed = map[string]int{}
	listed := make(map[int]bool, len(tids))
	for _, t := range tids {
		listed[t.TID] = true
		pl.p.tgids[t.TGID] = cp.key
		if trust[t.TID] && known[t.TID] != nil {
			r.Tasks++ // applied by the last pass (see trusted)
			continue
		}
		te, task, has := pl.planTask(t, r.Node, known[t.TID], r.Failed)
		if te != nil {
			change.record[t.TID] = te
		}
		if has {
			r.Tasks++
		} else if task != nil {
			cp.sets = append(cp.sets, pendingSet{key: cp.key, cg: cg, task: *task, node: r.Node})
		}
	}
	for tid := range known {
		if !listed[tid] {
			change.forget = append(change.forget, tid) // exited, or moved out: never touched again
		}
	}
	if entry == nil || entry.Ref != d.Ref || len(change.record) > 0 || len(change.forget) > 0 {
		cp.entry = change // new, or the container restarted under a new ID: undo must find this cgroup
	}
}

// planTask decides for one listed task t, which the ledger knows as known (nil if not),
// what to do to give it node. It returns the ledger entry to write (nil to leave it), the
// identified task to SET (nil for none), and has, true when the task has node already.
// A refused GET is counted in failed.
func (pl *planner) planTask(t cgroups.TaskRef, node int, known *taskEntry, failed map[string]int) (*taskEntry, *heldTask, bool) {
	v, err := pl.kernel.Get(t.TID)
	if err != nil {
		countFailure(failed, err)
		return nil, nil, false
	}
	if v == node && known != nil && !pl.verify(t.TID) {
		return nil, nil, true
	}
	if v == node {
		// Inherited from a thread or CLONE_VM parent the agent set, maybe under a reused
		// tid whose entry names the task before it: recorded (again) for undo.
		task, err := numa.ReadTask(pl.procRoot, t.TID)
		switch {
		case err != nil:
			return nil, nil, false // exited since listing
		case known != nil && known.Start == task.StartTime:
			return nil, nil, true
		}
		return &taskEntry{Start: task.StartTime, Prev: numa.NoNode, Values: []int{node}}, nil, true
	}
	// A task the ledger does not know, or whose value is not ours: read its identity (only
	// here, not for every known task on every pass) before acting.
	task, err := pl.p.ids.identify(t) // with its pidfd, held until the SET
	if err != nil {
		return nil, nil, false // exited since listing
	}
	return plannedEntry(known, task.StartTime, v, node), &task, false
}

// plannedEntry is the ledger entry of a task about to be set to node, whose value is v
// now: known's, with node added, when known is the same task (start); else a new one.
// Its Prev is never a value the agent set on that tid (known's Values): a task that holds
// one inherited it, or keeps it from an entry lost since; known's Prev stays.
func plannedEntry(known *taskEntry, start uint64, v, node int) *taskEntry {
	if known != nil && known.Start == start {
		if slices.Contains(known.Values, node) {
			return nil
		}
		return &taskEntry{Start: start, Prev: known.Prev, Values: append(slices.Clone(known.Values), node)}
	}
	prev := v
	if known != nil && slices.Contains(known.Values, v) {
		prev = known.Prev
	}
	return &taskEntry{Start: start, Prev: prev, Values: []int{node}}
}

// verify says whether a known task holding the agent's value has its start time read:
// in a pass that verifies starts, and for the task a fork event names (new even when its
// tid is known: a reused tid).
func (pl *planner) verify(tid int) bool {
	return pl.verifyStarts || pl.p.fork != nil && pl.p.fork.tid == tid
}

// cgroupReason is the reason a container reports when its cgroup could not be read.
func cgroupReason(err error) string {
	if errors.Is(err, cgroups.ErrContainerNotFound) {
		return numav1.ReasonContainerNotFound
	}
	return numav1.ReasonCgroupError
}

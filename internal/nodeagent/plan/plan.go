// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package plan

import (
	"errors"
	"fmt"
	"slices"

	"github.com/go-logr/logr"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
	"github.com/numapref/numapref/internal/cpuset"
	"github.com/numapref/numapref/internal/nodeagent/cgroups"
	"github.com/numapref/numapref/internal/nodeagent/desire"
	"github.com/numapref/numapref/internal/nodeagent/devices"
	"github.com/numapref/numapref/internal/nodeagent/known"
	"github.com/numapref/numapref/internal/numa"
	"github.com/numapref/numapref/internal/numa/mempolicy"
)

// Cgroups finds a container's cgroup, lists its tasks and reads its cpuset. It only reads.
type Cgroups interface {
	Resolve(ref cgroups.ContainerRef) (*cgroups.Container, error)
	ListTIDs(c *cgroups.Container) ([]cgroups.TaskRef, error)
	Cpuset(c *cgroups.Container) (cpuset.Cpuset, error)
}

// Input is what a pass plans from. Planning reads it and changes nothing in it but
// Choices, a copy, and IDs, which holds the pidfds of the tasks to SET.
type Input struct {
	// Desired is the desire the pass acts on.
	Desired map[desire.ContainerKey]desire.Desire
	// Known is what the ledger holds.
	Known    known.View
	Topology Topology
	// Choices are a copy of the sticky choices of Spread and MostFreeMemory; a pass that
	// resolves the automatic modes returns them in Plan.Choices.
	Choices Choices
	// Resolved are the automatic modes' choices of the last full pass, for a fork or start
	// pass (a full pass makes its own).
	Resolved Resolutions
	// Held are the choices made at containers' creation (AtCreation), kept though their
	// pods are not desired yet: their start follows.
	Held map[ChoiceKey]bool
	// Kernel reads tasks' preferred nodes: planning cannot set one.
	Kernel   numa.PreferredNodeReader
	Cgroups  Cgroups
	ProcRoot string
	Support  numa.Support
	// MemFree reads a node's free memory in bytes (MostFreeMemory).
	MemFree func(node int) (uint64, error)
	// Devices says what is known of a FollowDevices container's devices, without waiting
	// (devices.Cache); nil: nothing can be known.
	Devices func(key desire.ContainerKey, d desire.Desire) devices.Allocation
	Log     logr.Logger
	// MaxTasks is one container's share of the ledger and the pidfds: a container with
	// more tasks gets TooManyTasks.
	MaxTasks int
	// LedgerTasks is how many task entries the ledger holds; a full pass shares them by
	// namespace (share.go). 0: no bound.
	LedgerTasks int
	// VerifyStarts says known tasks holding the agent's value have their start time read
	// (a reused tid that inherited the value otherwise keeps a stale ledger entry).
	VerifyStarts bool
	// ForkTID is the task a fork pass's event names (0 for none): its start time is read
	// even when its tid is known, as a reused tid's.
	ForkTID int
	// IDs identifies the tasks to SET and holds their pidfds until the pass ends.
	IDs *Identifier
	// Policies is what this kernel's set_mempolicy takes (mempolicy.Probe): the memory
	// policy a container gets at creation, and what its tasks are checked against.
	Policies mempolicy.Support
	// PolicyRuntime says the runtime can be asked for a memory policy at creation: it has
	// served the agent through NRI since the agent started.
	PolicyRuntime bool
	// Asked says which memory policy the runtime was asked for at the creation of a
	// container, by its ID (policy.go); nil for none.
	Asked func(containerID string) (mempolicy.Policy, bool)
	// ReadPolicy reads the memory policy of process pid of the container containerID; nil
	// reads it from ProcRoot's numa_maps each time (mempolicy.ReadTaskPolicy).
	ReadPolicy func(containerID string, pid int) (mempolicy.Policy, error)
	// Migrate says the node's agent moves containers' pages to their home (mechanism
	// migrate): a container whose desire asks for it is listed and its Result.Migrate set,
	// even where no other mechanism can act.
	Migrate bool
}

// Plan is what a pass decided: the SETs to issue and the containers to undo, with the
// ledger entries to write ahead of the SETs, and what the pass learnt of the host.
type Plan struct {
	Containers []ContainerPlan
	// Orphans are the ledger's containers no longer desired: undone.
	Orphans []desire.ContainerKey
	// TGIDs are the processes the pass listed, by container.
	TGIDs map[int]desire.ContainerKey
	// Resolved says the pass resolved the automatic modes (a full pass, or a start pass
	// for a container with no choice yet): Resolutions are then every automatic
	// container's node, and Choices the sticky choices after them, which ChoicesChanged
	// says differ from Input.Choices.
	Resolved       bool
	Resolutions    Resolutions
	Choices        Choices
	ChoicesChanged bool
}

// ContainerPlan is what a pass decided for one desired container.
type ContainerPlan struct {
	Key    desire.ContainerKey
	Result Result
	// Undo says the container gets nothing and what the agent set in it is undone.
	Undo bool
	// Listing is the cgroup and tasks read; nil when the container was skipped.
	Listing *Listing
	// Entry is the change to the container's ledger entry; nil for none.
	Entry *known.Change
	// Sets are the SETs to issue, once Entry is on disk.
	Sets []PendingSet
}

// Listing is the cgroup and tasks a pass found for a container it acted on.
type Listing struct {
	Cgroup *cgroups.Container
	Tasks  []cgroups.TaskRef
}

// PendingSet is a kernel SET a pass decided on: of Node, on Task of the container Key
// whose cgroups are Cgroup. The task's pidfd, if any, stays open until the pass ends.
type PendingSet struct {
	Key    desire.ContainerKey
	Cgroup *cgroups.Container
	Task   HeldTask
	Node   int
}

// Result is what the engine achieved for one container on its last pass: planning
// decides most of it, applying the plan adds the outcome of the SETs.
type Result struct {
	Desire desire.Desire
	// Reason is Applied, or why the container was skipped or failed.
	Reason  string
	Message string
	// Node is the NUMA node the container prefers: the desire's for Static, the one chosen
	// on this host for the automatic modes; Why says how it was chosen ("" for Static).
	Node int
	Why  string
	// Tasks counts the container's tasks that have the preferred node.
	Tasks int
	// Failed counts tasks the kernel refused, by reason.
	Failed map[string]int
	// SkippedTasks counts the tasks left without the preference when the container is
	// skipped after its tasks were listed (MemoryPinnedElsewhere); 0 for the other reasons,
	// whose containers are skipped before any task is read. Only metrics use it.
	SkippedTasks int
	// Mechanism says what gave the container its home: MechanismPrctl, MechanismMemoryPolicy
	// or both ("prctl+memoryPolicy"); "" while nothing did.
	Mechanism string
	// Policy is the memory policy the container's init holds, as numa_maps prints it
	// ("prefer:1"); "" when it was not read (the container is not meant to have one).
	Policy string
	// PlacedAt says how the agent first placed the container (the engine's PlacedAtStart,
	// PlacedAtAfterStart or PlacedBeforeRestart); "" until a SET of it is confirmed.
	PlacedAt string
	// Migrate says the container's pages are to be moved to its home (its desire asks for
	// it, the node moves pages, and the container has a home and a listing), and
	// Migration where that stands (FoldMigration).
	Migrate   bool
	Migration Migration
	// Devices are the devices a FollowDevices container follows, with their NUMA nodes;
	// PolicyNodes, when they span a set spec.nodes allows, the nodes of its memory policy
	// (else the policy is on Node).
	Devices     []devices.Device
	PolicyNodes []int
}

// Full plans a full pass: the automatic modes' choice of node, every desired container,
// and the undo of the others.
func Full(in Input) Plan {
	pl := newPlanner(&in)
	var out Plan
	pl.resolveInto(&out)
	for key, d := range in.Desired {
		out.Containers = append(out.Containers, pl.planContainer(key, d, nil))
	}
	pl.shareLedger(&out)
	for key := range in.Known.Keys() {
		if _, ok := in.Desired[key]; !ok {
			out.Orphans = append(out.Orphans, key)
		}
	}
	out.TGIDs = pl.tgids
	return out
}

// One plans a pass of the one desired container key: a fork pass, for which trust lists
// the tasks it need not read again, or a start pass. An automatic container with no
// choice yet has it chosen as a full pass chooses, every other container's kept.
func One(in Input, key desire.ContainerKey, trust map[int]bool) Plan {
	pl := newPlanner(&in)
	d := in.Desired[key]
	var out Plan
	if d.Placement.Automatic() && in.Resolved.due(key) {
		pl.resolveInto(&out)
	}
	out.Containers = []ContainerPlan{pl.planContainer(key, d, trust)}
	out.TGIDs = pl.tgids
	return out
}

// planner decides what a pass does. It reads the host (cgroup files, /proc, the kernel's
// GET) and the ledger's view, and changes neither.
type planner struct {
	in *Input
	// choices are the sticky choices, which resolve updates; resolved is every automatic
	// container's node; cgroups caches the cgroups and cpusets the pass read; tgids are
	// the processes listed.
	choices  Choices
	resolved Resolutions
	cgroups  map[desire.ContainerKey]hostCgroup
	tgids    map[int]desire.ContainerKey
	// liveDevices are the choices of the FollowDevices containers resolve met, and
	// devicesChanged says it changed one (devices.go).
	liveDevices    map[ChoiceKey]bool
	devicesChanged bool
}

func newPlanner(in *Input) *planner {
	choices := in.Choices
	if choices == nil {
		choices = Choices{}
	}
	return &planner{in: in, choices: choices, resolved: in.Resolved,
		cgroups: map[desire.ContainerKey]hostCgroup{}, tgids: map[int]desire.ContainerKey{}}
}

// resolveInto resolves the automatic modes of the whole desire into out.
func (pl *planner) resolveInto(out *Plan) {
	out.ChoicesChanged = pl.resolve(pl.in.Desired)
	out.Resolved, out.Resolutions, out.Choices = true, pl.resolved, pl.choices
}

// planContainer reads the kernel state of one container's tasks and decides which tasks
// need a SET, and the ledger entries to write before. trust is the set of tasks a fork
// pass need not read again.
func (pl *planner) planContainer(key desire.ContainerKey, d desire.Desire, trust map[int]bool) ContainerPlan {
	cp := ContainerPlan{Key: key, Result: Result{Desire: d, Node: d.Node}}
	cg, tids, reason, msg := pl.admit(key, d, &cp.Result)
	if reason != "" {
		cp.Result.Reason, cp.Result.Message = reason, msg
		// What was set before is undone, except when the host could not be read: a passing
		// cgroup error must not churn the tasks.
		cp.Undo = reason != numav1.ReasonCgroupError
		return cp
	}
	cp.Listing = &Listing{Cgroup: cg, Tasks: tids}
	cp.Result.Reason = numav1.ReasonApplied
	cp.Result.Migrate = pl.migrates(d)
	if d.WantsPolicy(pl.in.Support.Supported) {
		pl.checkPolicy(&cp.Result, tids)
	}
	if !pl.in.Support.Supported {
		return cp // the memory policy alone: nothing to set, nothing to undo
	}
	pl.planTasks(&cp, d, cg, tids, trust)
	cp.Result.Mechanism = joinMechanisms(MechanismPrctl, cp.Result.Mechanism)
	return cp
}

// admit decides the container's node (into r) and reads its cgroup and tasks, or returns
// the reason (and message) the container gets nothing.
func (pl *planner) admit(key desire.ContainerKey, d desire.Desire, r *Result) (*cgroups.Container, []cgroups.TaskRef, string, string) {
	if reason, msg := pl.home(key, d, r); reason != "" {
		return nil, nil, reason, msg
	}
	node := r.Node
	cg, cs, err := pl.cgroupOf(key, d)
	if err != nil {
		return nil, nil, cgroupReason(err), err.Error()
	}
	if len(cs.Mems) > 0 && !slices.Contains(cs.Mems, node) {
		if tids, err := pl.in.Cgroups.ListTIDs(cg); err == nil {
			r.SkippedTasks = len(tids) // for metrics only: a cgroup read, no kernel call
		}
		return nil, nil, numav1.ReasonMemoryPinnedElsewhere, fmt.Sprintf("cpuset.mems of the container is %s; NUMA node %d would fight it", numa.FormatList(cs.Mems), node)
	}
	tids, err := pl.in.Cgroups.ListTIDs(cg)
	if err != nil {
		return nil, nil, cgroupReason(err), err.Error()
	}
	if len(tids) > pl.in.MaxTasks {
		r.SkippedTasks = len(tids)
		return nil, nil, numav1.ReasonTooManyTasks, tooManyTasks(pl.in.MaxTasks)
	}
	return cg, tids, "", ""
}

// home decides the container's node (into r), or returns the reason (and message) it has
// none on this host: the first half of admit, and all of a creation's decision.
func (pl *planner) home(key desire.ContainerKey, d desire.Desire, r *Result) (string, string) {
	res := pl.resolved.of(key) // the automatic modes' choice (automatic.go)
	r.Devices, r.PolicyNodes = res.devices, res.policyNodes
	switch {
	case d.Refusal != "":
		return d.Refusal, d.Message
	case !pl.in.Support.Supported && !d.WantsPolicy(false) && !pl.migrates(d):
		return numav1.ReasonKernelUnsupported, "this kernel cannot set a preferred NUMA node: " + pl.in.Support.Reason + pl.noMigration(d)
	case !pl.in.Support.Supported && !pl.in.PolicyRuntime && d.MemoryPolicy != numav1.MemoryPolicyAtCreation && !pl.migrates(d):
		// Auto where no mechanism is: nothing to read either.
		return numav1.ReasonKernelUnsupported, "this kernel cannot set a preferred NUMA node: " + pl.in.Support.Reason +
			"; and no memory policy can be given at creation: the agent has not been connected to the runtime through NRI" + pl.noMigration(d)
	case d.Placement.Automatic() && res.skip != "":
		return res.skip, res.message
	case d.Placement.Automatic():
		r.Node, r.Why = res.node, res.why
	}
	if topo := pl.in.Topology; !topo.online[r.Node] {
		return numav1.ReasonNodeNotPresent, fmt.Sprintf("NUMA node %d is not online on this host (online: %s)", r.Node, numa.FormatList(topo.nodes))
	}
	return "", ""
}

// planTasks decides, for each listed task of a container, whether it needs a SET, and
// what its ledger entry becomes.
func (pl *planner) planTasks(cp *ContainerPlan, d desire.Desire, cg *cgroups.Container, tids []cgroups.TaskRef, trust map[int]bool) {
	entry := pl.in.Known.Entry(cp.Key)
	change := &known.Change{Ref: d.Ref, Put: map[int]*known.Task{}}
	r := &cp.Result
	r.Failed = map[string]int{}
	listed := make(map[int]bool, len(tids))
	for _, t := range tids {
		listed[t.TID] = true
		pl.tgids[t.TGID] = cp.Key
		if trust[t.TID] && entry.Has(t.TID) {
			r.Tasks++ // applied by the last pass (the engine's trusted)
			continue
		}
		te, task, has := pl.planTask(t, r.Node, entry, r.Failed)
		if te != nil {
			change.Put[t.TID] = te
		}
		if has {
			r.Tasks++
		} else if task != nil {
			cp.Sets = append(cp.Sets, PendingSet{Key: cp.Key, Cgroup: cg, Task: *task, Node: r.Node})
		}
	}
	for tid := range entry.TIDs() {
		if !listed[tid] {
			change.Forget = append(change.Forget, tid) // exited, or moved out: never touched again
		}
	}
	if !entry.Exists() || entry.Ref() != d.Ref || len(change.Put) > 0 || len(change.Forget) > 0 {
		cp.Entry = change // new, or the container restarted under a new ID: undo must find this cgroup
	}
}

// planTask decides for one listed task t, whose ledger entry (if any) entry holds, what to
// do to give it node. It returns the ledger entry to write (nil to leave it), the
// identified task to SET (nil for none), and has, true when the task has node already.
// A refused GET is counted in failed.
func (pl *planner) planTask(t cgroups.TaskRef, node int, entry known.Entry, failed map[string]int) (*known.Task, *HeldTask, bool) {
	v, err := pl.in.Kernel.Get(t.TID)
	if err != nil {
		CountFailure(failed, err)
		return nil, nil, false
	}
	if v == node && entry.Has(t.TID) && !pl.verify(t.TID) {
		return nil, nil, true
	}
	var had *known.Task
	if te, ok := entry.Task(t.TID); ok {
		had = &te
	}
	if v == node {
		// Inherited from a thread or CLONE_VM parent the agent set, maybe under a reused
		// tid whose entry names the task before it: recorded (again) for undo.
		task, err := numa.ReadTask(pl.in.ProcRoot, t.TID)
		switch {
		case err != nil:
			return nil, nil, false // exited since listing
		case had != nil && had.Start == task.StartTime:
			return nil, nil, true
		}
		return &known.Task{Start: task.StartTime, Prev: numa.NoNode, Values: []int{node}}, nil, true
	}
	// A task the ledger does not know, or whose value is not ours: read its identity (only
	// here, not for every known task on every pass) before acting.
	task, err := pl.in.IDs.Identify(t) // with its pidfd, held until the SET
	if err != nil {
		return nil, nil, false // exited since listing
	}
	return plannedEntry(had, task.StartTime, v, node), &task, false
}

// plannedEntry is the ledger entry of a task about to be set to node, whose value is v
// now: had's, with node added, when had is the same task (start); else a new one. Its
// Prev is never a value the agent set on that tid (had's Values): a task that holds one
// inherited it, or keeps it from an entry lost since; had's Prev stays.
func plannedEntry(had *known.Task, start uint64, v, node int) *known.Task {
	if had != nil && had.Start == start {
		if slices.Contains(had.Values, node) {
			return nil
		}
		return &known.Task{Start: start, Prev: had.Prev, Values: append(slices.Clone(had.Values), node)}
	}
	prev := v
	if had != nil && slices.Contains(had.Values, v) {
		prev = had.Prev
	}
	return &known.Task{Start: start, Prev: prev, Values: []int{node}}
}

// verify says whether a known task holding the agent's value has its start time read:
// in a pass that verifies starts, and for the task a fork event names (new even when its
// tid is known: a reused tid).
func (pl *planner) verify(tid int) bool {
	return pl.in.VerifyStarts || pl.in.ForkTID != 0 && pl.in.ForkTID == tid
}

// cgroupReason is the reason a container reports when its cgroup could not be read.
func cgroupReason(err error) string {
	if errors.Is(err, cgroups.ErrContainerNotFound) {
		return numav1.ReasonContainerNotFound
	}
	return numav1.ReasonCgroupError
}

// CountFailure counts a refused kernel call by reason and returns the reason ("" for a
// task that exited since listing: normal, not a failure).
func CountFailure(failed map[string]int, err error) string {
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

// tooManyTasks is the message of a container past its share. It leaves out how many tasks
// the container has (SkippedTasks and the metrics have it): a message that changed with
// every thread would make every pass a change of the node's results.
func tooManyTasks(share int) string {
	return fmt.Sprintf("the container has more than the %d tasks one container may have placed on this node "+
		"(the agent's --max-tasks-per-container): the ledger and the pidfds the agent keeps per task are shared by "+
		"every container of the node, so this one alone is not placed", share)
}

// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package plan

import (
	"errors"
	"fmt"
	"slices"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
	"github.com/numapref/numapref/internal/cpuset"
	"github.com/numapref/numapref/internal/nodeagent/cgroups"
	"github.com/numapref/numapref/internal/nodeagent/desire"
	"github.com/numapref/numapref/internal/numa"
	"github.com/numapref/numapref/internal/numa/mempolicy"
)

// The mechanisms that can give a container its home, as Result.Mechanism, the node's
// report and inspect name them.
const (
	// MechanismPrctl: the kernel's forced preferred node (PR_PREFERRED_NID), or the
	// emulator's, set on every task.
	MechanismPrctl = "prctl"
	// MechanismMemoryPolicy: a memory policy on the home, which the runtime set in the
	// container's init at creation and every task inherited.
	MechanismMemoryPolicy = "memoryPolicy"
)

// joinMechanisms names the mechanisms a and b together ("prctl+memoryPolicy"); either may
// be "".
func joinMechanisms(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return a + "+" + b
}

// HomePolicy is the memory policy a container whose home is node gets at creation on a
// kernel that takes s: MPOL_PREFERRED_MANY with MPOL_F_NUMA_BALANCING on that one node
// where the kernel takes it (Linux 6.10), which keeps NUMA balancing scanning the task and
// so moving its stray pages home and, with the prctl, steering the task; else
// MPOL_PREFERRED, which takes the task out of NUMA balancing.
func HomePolicy(node int, s mempolicy.Support) (mempolicy.Policy, error) {
	return homePolicyOn([]int{node}, s)
}

// resultPolicy is the memory policy of the container of r: on its home, or on
// r.PolicyNodes, the nodes of the devices it follows, when they are a set.
func resultPolicy(r Result, s mempolicy.Support) (mempolicy.Policy, error) {
	if len(r.PolicyNodes) > 1 && (s.PreferredMany || s.PreferredManyBalancing) {
		return homePolicyOn(r.PolicyNodes, s)
	}
	return HomePolicy(r.Node, s)
}

// homePolicyOn is HomePolicy on every node of nodes: MPOL_PREFERRED_MANY for more than one.
func homePolicyOn(nodes []int, s mempolicy.Support) (mempolicy.Policy, error) {
	if !s.Preferred && !s.PreferredMany {
		return mempolicy.Policy{}, errors.New("this kernel takes no soft memory policy (no MPOL_PREFERRED)")
	}
	return mempolicy.Choose(numa.NewNodeMask(nodes...), s.PreferredManyBalancing, s)
}

// checkPolicy reads the memory policy of the container's init (the first listed task's
// process) and says in r whether it is the home's. Without the prctl the policy is all
// the container can have: r's reason then says why it has none.
func (pl *planner) checkPolicy(r *Result, tids []cgroups.TaskRef) {
	if len(tids) == 0 {
		return // nothing runs yet: the next pass reads it
	}
	want, err := resultPolicy(*r, pl.in.Policies)
	if err != nil {
		pl.noPolicy(r, numav1.ReasonMemoryPolicyUnsupported, err.Error())
		return
	}
	tgid := tids[0].TGID
	read := pl.in.ReadPolicy
	if read == nil {
		read = func(_ string, pid int) (mempolicy.Policy, error) {
			return mempolicy.ReadTaskPolicy(pl.in.ProcRoot, pid)
		}
	}
	got, err := read(r.Desire.Ref.ContainerID, tgid)
	switch {
	case errors.Is(err, numa.ErrTaskGone), errors.Is(err, mempolicy.ErrNoMappings):
		return // it exited, or is exiting: the next pass reads another
	case err != nil:
		pl.noPolicy(r, numav1.ReasonCgroupError, err.Error())
		return
	}
	r.Policy = got.String()
	if got.Equal(want) {
		r.Mechanism = MechanismMemoryPolicy
		if !pl.in.Support.Supported {
			r.Tasks = len(tids) // each inherited it from the init
		}
		return
	}
	asked, wasAsked := mempolicy.Policy{}, false
	if pl.in.Asked != nil {
		asked, wasAsked = pl.in.Asked(r.Desire.Ref.ContainerID)
	}
	switch {
	case wasAsked && got.Equal(asked):
		// Its home changed since: the policy it was created with stays.
		pl.noPolicy(r, numav1.ReasonPolicyAtCreationOnly, fmt.Sprintf(
			"the container was created with memory policy %s, its home then; a running container keeps the policy it was created with, and it gets %s when it is created again", got, want))
	case wasAsked:
		pl.noPolicy(r, numav1.ReasonMemoryPolicyUnsupported, fmt.Sprintf(
			"the runtime was asked for memory policy %s at the container's creation, and its init (pid %d) holds %s: the runtime does not apply linux.memoryPolicy (runc 1.4 or later, crun 1.22 or later do)", asked, tgid, got))
	case !pl.in.PolicyRuntime:
		pl.noPolicy(r, numav1.ReasonMemoryPolicyUnsupported, fmt.Sprintf(
			"the container's init (pid %d) holds memory policy %s, not %s, and the agent has not been connected to the runtime through NRI, which gives the policy at creation", tgid, got, want))
	default:
		pl.noPolicy(r, numav1.ReasonPolicyAtCreationOnly, fmt.Sprintf(
			"the container's init (pid %d) holds memory policy %s, not %s: it was created before it was selected, and a memory policy can only be given at creation; it gets %s when it is created again", tgid, got, want, want))
	}
}

// noPolicy records in r that the container does not hold its home's memory policy: the
// reason is r's own when the policy is all it can have (no prctl), else only a note.
func (pl *planner) noPolicy(r *Result, reason, msg string) {
	if pl.in.Support.Supported {
		return // the prctl acts; inspect shows the policy read
	}
	r.Reason, r.Message = reason, msg
}

// Creation is a container the runtime is creating, as its request describes it: not yet
// in any cgroup, with no task.
type Creation struct {
	Key desire.ContainerKey
	// Cpuset is the container's cpuset.cpus and cpuset.mems as the runtime will set them
	// (empty: none).
	Cpuset cpuset.Cpuset
}

// AtCreation decides the home of the container c the runtime is creating, whose desire
// in.Desired holds, with the decision function of every pass (the automatic modes'
// choices included, which the returned plan carries as a start pass's do), and the memory
// policy it gets on a kernel that takes in.Policies. The plan's one container has no
// listing, no ledger entry and no SET; its Result says the home, or why there is none.
func AtCreation(in Input, c Creation) (Plan, mempolicy.Policy) {
	d := in.Desired[c.Key]
	in.Cgroups = creatingCgroups{Cgroups: in.Cgroups, ref: d.Ref, cs: c.Cpuset}
	in.PolicyRuntime = true // the runtime is asking
	pl := newPlanner(&in)
	var out Plan
	if d.Placement.Automatic() && in.Resolved.due(c.Key) {
		pl.resolveInto(&out)
	}
	cp := ContainerPlan{Key: c.Key, Result: Result{Desire: d, Node: d.Node}}
	r := &cp.Result
	var policy mempolicy.Policy
	reason, msg := pl.home(c.Key, d, r)
	if reason == "" && len(c.Cpuset.Mems) > 0 && !slices.Contains(c.Cpuset.Mems, r.Node) {
		reason, msg = numav1.ReasonMemoryPinnedElsewhere, fmt.Sprintf("cpuset.mems of the container is %s; NUMA node %d would fight it", numa.FormatList(c.Cpuset.Mems), r.Node)
	}
	if reason == "" {
		var err error
		if policy, err = resultPolicy(*r, in.Policies); err != nil {
			reason, msg = numav1.ReasonMemoryPolicyUnsupported, err.Error()
		}
	}
	r.Reason, r.Message = reason, msg
	if reason == "" {
		r.Reason, r.Mechanism, r.Policy = numav1.ReasonApplied, MechanismMemoryPolicy, policy.String()
	}
	out.Containers = []ContainerPlan{cp}
	return out, policy
}

// creatingCgroups answers for the container being created from its request: its cgroup
// does not exist yet. Every other container's is read from the host.
type creatingCgroups struct {
	Cgroups
	ref cgroups.ContainerRef
	cs  cpuset.Cpuset
}

// creating is the cgroup creatingCgroups stands in with.
var creating = &cgroups.Container{}

func (c creatingCgroups) Resolve(ref cgroups.ContainerRef) (*cgroups.Container, error) {
	if ref == c.ref {
		return creating, nil
	}
	return c.Cgroups.Resolve(ref)
}

func (c creatingCgroups) ListTIDs(cg *cgroups.Container) ([]cgroups.TaskRef, error) {
	if cg == creating {
		return nil, nil
	}
	return c.Cgroups.ListTIDs(cg)
}

func (c creatingCgroups) Cpuset(cg *cgroups.Container) (cpuset.Cpuset, error) {
	if cg == creating {
		return c.cs, nil
	}
	return c.Cgroups.Cpuset(cg)
}

// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package nodeagent

import (
	"maps"
	"sync"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
	"github.com/numapref/numapref/internal/cpuset"
	"github.com/numapref/numapref/internal/nodeagent/desire"
	"github.com/numapref/numapref/internal/nodeagent/plan"
	"github.com/numapref/numapref/internal/numa/mempolicy"
)

// PolicyAtCreation decides the memory policy of a container the runtime is creating (NRI's
// CreateContainer: internal/nodeagent/nri), for the runtime to set in its init before
// exec. d is its desire (desire.PlanStart) and cs its cpuset as the runtime's request sets
// it. The home comes from the decision of every pass (plan.AtCreation): a Spread or
// MostFreeMemory pod's choice made here is kept, and the pod keeps it at its start. ok is
// false when the container gets no policy: its desire does not want one on this host,
// there is no home for it (r says why), or the engine is not synced or is draining. The
// engine remembers what it asked for, by container ID, so that a pass can tell a runtime
// that ignored it from a container created before it was selected.
func (e *Engine) PolicyAtCreation(d desire.Desire, cs cpuset.Cpuset) (r plan.Result, p mempolicy.Policy, ok bool) {
	if !d.WantsPolicy(e.cfg.Support.Supported) || e.desires.draining.Load() {
		return plan.Result{}, mempolicy.Policy{}, false
	}
	if !d.Placement.Automatic() {
		return e.staticAtCreation(d, cs)
	}
	e.devices.await(d) // FollowDevices: what the kubelet says by then, outside the pass lock
	e.passMu.Lock()
	defer e.passMu.Unlock()
	desired, _, ok := e.desires.forPass(false)
	if !ok {
		return plan.Result{}, mempolicy.Policy{}, false
	}
	key := d.Key()
	desired = maps.Clone(desired)
	desired[key] = d
	ps := &pass{kind: passStart, desired: desired, ids: plan.NewIdentifier(e.cfg.ProcRoot, e.cfg.handles, 0), known: e.ledger.View()}
	pl, p := plan.AtCreation(e.planInput(ps), plan.Creation{Key: key, Cpuset: cs})
	e.placements.adopt(pl) // a choice made here is kept, for the container's start
	if d.Placement.Automatic() && d.Placement.Mode != numav1.PlacementModeFollowCPUs {
		e.placements.hold(plan.ChoiceKeyOf(d), e.cfg.Clock.Now().Add(e.cfg.StartGrace))
	}
	r = pl.Containers[0].Result
	if r.Mechanism != plan.MechanismMemoryPolicy {
		return r, mempolicy.Policy{}, false
	}
	e.asked.put(d.Ref.ContainerID, p)
	return r, p, true
}

// staticAtCreation is PolicyAtCreation for a Static desire, which needs nothing a pass
// holds but the topology: it never waits for a pass, so a long one (a container at its
// task share, a fork storm) delays no creation.
func (e *Engine) staticAtCreation(d desire.Desire, cs cpuset.Cpuset) (plan.Result, mempolicy.Policy, bool) {
	if _, _, synced := e.desires.forPass(false); !synced {
		return plan.Result{}, mempolicy.Policy{}, false
	}
	key := d.Key()
	in := plan.Input{Desired: map[desire.ContainerKey]desire.Desire{key: d}, Topology: e.placements.lastTopology(),
		Support: e.cfg.Support, Policies: e.cfg.Policies, Log: e.cfg.Log}
	pl, p := plan.AtCreation(in, plan.Creation{Key: key, Cpuset: cs})
	r := pl.Containers[0].Result
	if r.Mechanism != plan.MechanismMemoryPolicy {
		return r, mempolicy.Policy{}, false
	}
	e.asked.put(d.Ref.ContainerID, p)
	return r, p, true
}

// askedBound bounds the policies remembered: a node creates far fewer containers between
// two agent restarts that are still selected, and a forgotten one reads as a container
// created before its selection (PolicyAtCreationOnly) rather than MemoryPolicyUnsupported.
const askedBound = 4096

// askedPolicies are the memory policies the runtime was asked for at creation, by bare
// container ID, the oldest forgotten first past askedBound. It has its own lock: passes
// read it.
type askedPolicies struct {
	mu    sync.Mutex
	m     map[string]mempolicy.Policy
	order []string
}

func newAskedPolicies() *askedPolicies {
	return &askedPolicies{m: map[string]mempolicy.Policy{}}
}

func (a *askedPolicies) put(id string, p mempolicy.Policy) {
	id = desire.BareContainerID(id)
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, ok := a.m[id]; !ok {
		a.order = append(a.order, id)
	}
	a.m[id] = p
	for len(a.order) > askedBound {
		delete(a.m, a.order[0])
		a.order = a.order[1:]
	}
}

// get is plan.Input's Asked.
func (a *askedPolicies) get(id string) (mempolicy.Policy, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	p, ok := a.m[desire.BareContainerID(id)]
	return p, ok
}

// readPolicies remembers the memory policy read of each container's init, by container
// ID and pid: no one can change a process's policy from outside, and a numa_maps read
// walks the page tables of each mapping it prints, a heap's among them, which a pass over
// every selected container every rescan would pay again and again. Another first process
// is read anew (a restarted container has a new ID).
// Bounded like asked; passes read it under passMu, so it needs no lock of its own.
type readPolicies struct {
	procRoot string
	m        map[string]readPolicy
	order    []string
}

type readPolicy struct {
	pid    int
	policy mempolicy.Policy
}

func newReadPolicies(procRoot string) *readPolicies {
	return &readPolicies{procRoot: procRoot, m: map[string]readPolicy{}}
}

// read is plan.Input's ReadPolicy.
func (c *readPolicies) read(containerID string, pid int) (mempolicy.Policy, error) {
	id := desire.BareContainerID(containerID)
	if r, ok := c.m[id]; ok && r.pid == pid {
		return r.policy, nil
	}
	p, err := mempolicy.ReadTaskPolicy(c.procRoot, pid)
	if err != nil {
		return p, err
	}
	if _, ok := c.m[id]; !ok {
		c.order = append(c.order, id)
	}
	c.m[id] = readPolicy{pid: pid, policy: p}
	for len(c.order) > askedBound {
		delete(c.m, c.order[0])
		c.order = c.order[1:]
	}
	return p, nil
}

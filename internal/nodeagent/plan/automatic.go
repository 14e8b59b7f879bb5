// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package plan

import (
	"cmp"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/types"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
	"github.com/numapref/numapref/internal/cpuset"
	"github.com/numapref/numapref/internal/nodeagent/cgroups"
	"github.com/numapref/numapref/internal/nodeagent/desire"
	"github.com/numapref/numapref/internal/nodeagent/devices"
	"github.com/numapref/numapref/internal/numa"
)

// The automatic placement modes choose each container's node on this host, at the start of
// every full pass:
//   - FollowCPUs, per container: the node that holds most of its effective cpuset.cpus.
//     Not sticky: when the cpuset changes, the choice follows.
//   - Spread and MostFreeMemory, per pod (its selected containers go together), sticky:
//     a pod keeps the node it got while it stays selected, across passes and agent
//     restarts (the engine keeps the choices in a file beside the ledger); a pod that
//     leaves frees its share. Spread gives a new pod the node its group weighs least on
//     (CPU requests), ties to the lowest id; MostFreeMemory the node with the most MemFree.
//
// Every mode honours cpuset.mems: the candidates are the allowed online nodes the pod's
// containers may allocate on, so a container pinned to one node gets that node.

// Resolution is the node a pass chose for one automatic container, or why there is none.
type Resolution struct {
	node    int
	why     string // shown in the Applied Event and inspect: "Spread: 2 of 4 pods on node 1"
	skip    string // a reason not to act, with message
	message string
	// FollowDevices: the devices followed; the nodes of the memory policy when they span
	// a set spec.nodes allows (else the policy is on node alone); waiting says the skip
	// is an answer awaited or not had, which a kept choice outlasts (devices.go).
	devices     []devices.Device
	policyNodes []int
	waiting     bool
}

// Resolutions are the nodes a pass chose for the automatic containers. The engine keeps
// the last ones for its fork and start passes; only planning reads them.
type Resolutions struct {
	m map[desire.ContainerKey]Resolution
}

// Has says whether container key was resolved.
func (r Resolutions) Has(key desire.ContainerKey) bool {
	_, ok := r.m[key]
	return ok
}

func (r Resolutions) of(key desire.ContainerKey) Resolution { return r.m[key] }

// due says whether a pass of container key alone resolves the automatic modes again: it
// was not resolved, or only to wait for its devices (FollowDevices), whose answer may be
// in since.
func (r Resolutions) due(key desire.ContainerKey) bool {
	res, ok := r.m[key]
	return !ok || res.waiting
}

// ChoiceKey names a sticky choice: one pod in one placement group.
type ChoiceKey struct {
	PodUID types.UID `json:"podUID"`
	Group  string    `json:"group"`
}

// Choice is a sticky choice, as the engine's choices file keeps it.
type Choice struct {
	ChoiceKey
	Mode numav1.PlacementMode `json:"mode"`
	Node int                  `json:"node"`
	Why  string               `json:"why"`
	// Weight is the pod's weight in its Spread group.
	Weight int64 `json:"weight,omitempty"`
}

// Choices are the sticky choices of Spread and MostFreeMemory.
type Choices map[ChoiceKey]Choice

// podMembers are the selected containers of one pod in one placement group.
type podMembers struct {
	key       ChoiceKey
	pod       types.NamespacedName
	placement desire.Placement
	keys      []desire.ContainerKey
}

// hostCgroup is a container's cgroup and cpuset as read once per pass.
type hostCgroup struct {
	cg  *cgroups.Container
	cs  cpuset.Cpuset
	err error
}

// cgroupOf returns d's cgroup and cpuset, read at most once per pass.
func (pl *planner) cgroupOf(key desire.ContainerKey, d desire.Desire) (*cgroups.Container, cpuset.Cpuset, error) {
	if h, ok := pl.cgroups[key]; ok {
		return h.cg, h.cs, h.err
	}
	var h hostCgroup
	h.cg, h.err = pl.in.Cgroups.Resolve(d.Ref)
	if h.err == nil {
		h.cs, h.err = pl.in.Cgroups.Cpuset(h.cg)
	}
	pl.cgroups[key] = h
	return h.cg, h.cs, h.err
}

// resolve chooses the node of every container whose mode is automatic, updating the sticky
// choices, and reports whether the choices changed.
func (pl *planner) resolve(desired map[desire.ContainerKey]desire.Desire) bool {
	pl.resolved = Resolutions{m: map[desire.ContainerKey]Resolution{}}
	pl.liveDevices, pl.devicesChanged = map[ChoiceKey]bool{}, false
	groups := pl.groupPods(desired)
	dirty := pl.devicesChanged
	for ck := range pl.choices {
		if pl.liveDevices[ck] {
			continue // a FollowDevices container's, kept in step by resolveDevices
		}
		if m, ok := groups[ck]; !ok && !pl.in.Held[ck] || ok && m.placement.Mode != pl.choices[ck].Mode {
			delete(pl.choices, ck) // the pod left, or its preference changed mode: its share is free
			dirty = true
		}
	}
	pods := pl.podsInOrder(groups)
	sizes := map[string]int{} // pods per group, for the Spread message
	for _, m := range pods {
		sizes[m.key.Group]++
	}
	memFree := map[int]uint64{}
	for _, m := range pods {
		slices.SortFunc(m.keys, func(a, b desire.ContainerKey) int { return cmp.Compare(a.Container, b.Container) })
		res, changed := pl.choosePod(m, desired, sizes[m.key.Group], memFree)
		dirty = dirty || changed
		for _, k := range m.keys {
			if r, ok := res[k]; ok {
				pl.resolved.m[k] = r
			}
		}
	}
	return dirty
}

// groupPods resolves every FollowCPUs and FollowDevices container, and groups the
// containers of Spread and MostFreeMemory by pod and group.
func (pl *planner) groupPods(desired map[desire.ContainerKey]desire.Desire) map[ChoiceKey]*podMembers {
	groups := map[ChoiceKey]*podMembers{}
	for key, d := range desired {
		if d.Refusal != "" || !d.Placement.Automatic() || !pl.in.Support.Supported && !d.WantsPolicy(false) {
			continue
		}
		switch d.Placement.Mode {
		case numav1.PlacementModeFollowCPUs:
			pl.resolved.m[key] = pl.followCPUs(key, d)
			continue
		case numav1.PlacementModeFollowDevices:
			pl.resolved.m[key] = pl.resolveDevices(key, d)
			continue
		}
		ck := ChoiceKey{PodUID: d.PodUID, Group: d.Placement.Group}
		m := groups[ck]
		if m == nil {
			m = &podMembers{key: ck, pod: d.Pod, placement: d.Placement}
			groups[ck] = m
		}
		m.keys = append(m.keys, key)
	}
	return groups
}

// podsInOrder lists the pods of groups with a kept choice first, so that they count in
// the loads before any new pod is placed; then new pods in a stable order.
func (pl *planner) podsInOrder(groups map[ChoiceKey]*podMembers) []*podMembers {
	pods := make([]*podMembers, 0, len(groups))
	for _, m := range groups {
		pods = append(pods, m)
	}
	slices.SortFunc(pods, func(a, b *podMembers) int {
		_, ka := pl.choices[a.key]
		_, kb := pl.choices[b.key]
		return cmp.Or(-cmp.Compare(boolInt(ka), boolInt(kb)), cmp.Compare(a.pod.Namespace, b.pod.Namespace),
			cmp.Compare(a.pod.Name, b.pod.Name), cmp.Compare(a.key.PodUID, b.key.PodUID), cmp.Compare(a.key.Group, b.key.Group))
	})
	return pods
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// choosePod resolves the containers of one pod of a Spread or MostFreeMemory group: the
// pod keeps its choice while every member may use its node, else gets a new one.
func (pl *planner) choosePod(m *podMembers, desired map[desire.ContainerKey]desire.Desire, groupSize int, memFree map[int]uint64) (map[desire.ContainerKey]Resolution, bool) {
	out := map[desire.ContainerKey]Resolution{}
	candidates, skip, msg := pl.candidates(m.placement)
	var usable []desire.ContainerKey
	for _, k := range m.keys {
		if skip != "" {
			out[k] = Resolution{skip: skip, message: msg}
			continue
		}
		_, cs, err := pl.cgroupOf(k, desired[k])
		if err != nil {
			out[k] = Resolution{skip: cgroupReason(err), message: err.Error()}
			continue
		}
		if len(cs.Mems) > 0 {
			within := intersect(candidates, cs.Mems)
			if len(within) == 0 {
				out[k] = Resolution{skip: numav1.ReasonMemoryPinnedElsewhere,
					message: fmt.Sprintf("cpuset.mems of the container is %s, and %s", numa.FormatList(cs.Mems), describeCandidates(m.placement, candidates))}
				continue
			}
			candidates = within
		}
		usable = append(usable, k)
	}
	if len(usable) == 0 {
		return out, false
	}
	c, kept := pl.choices[m.key]
	changed := !kept || !slices.Contains(candidates, c.Node)
	if changed {
		c = pl.newChoice(m, candidates, groupSize, memFree)
	}
	for _, k := range usable {
		out[k] = Resolution{node: c.Node, why: c.Why}
	}
	return out, changed
}

// newChoice chooses a node among candidates for pod m, which has no choice that fits.
func (pl *planner) newChoice(m *podMembers, candidates []int, groupSize int, memFree map[int]uint64) Choice {
	delete(pl.choices, m.key) // a choice that no longer fits weighs nowhere
	c := Choice{ChoiceKey: m.key, Mode: m.placement.Mode, Weight: m.placement.Weight}
	switch {
	case len(candidates) == 1 && len(pl.in.Topology.nodes) > 1:
		c.Node = candidates[0]
		c.Why = fmt.Sprintf("%s: the only node the pod may use here", m.placement.Mode)
	case m.placement.Mode == numav1.PlacementModeSpread:
		c.Node, c.Why = pl.spreadNode(m, candidates, groupSize)
	default:
		c.Node, c.Why = pl.freestNode(candidates, memFree)
	}
	pl.choices[m.key] = c
	return c
}

// candidates are the online nodes the placement allows, or why there are none.
func (pl *planner) candidates(p desire.Placement) ([]int, string, string) {
	online := pl.in.Topology.nodes
	if p.Allowed == "" {
		return slices.Clone(online), "", ""
	}
	allowed, err := numa.ParseList(p.Allowed)
	if err != nil { // Allowed is formatted by the agent: cannot happen
		return nil, numav1.ReasonNodeNotPresent, fmt.Sprintf("allowed nodes %q: %v", p.Allowed, err)
	}
	c := intersect(online, allowed)
	if len(c) == 0 {
		return nil, numav1.ReasonNodeNotPresent, fmt.Sprintf("none of the allowed NUMA nodes (%s) is online on this host (online: %s)",
			p.Allowed, numa.FormatList(online))
	}
	return c, "", ""
}

func describeCandidates(p desire.Placement, candidates []int) string {
	if p.Allowed == "" {
		return fmt.Sprintf("the host's nodes are %s", numa.FormatList(candidates))
	}
	return fmt.Sprintf("the allowed online nodes are %s", numa.FormatList(candidates))
}

// spreadNode gives a new pod of a Spread group the candidate its group weighs least on.
func (pl *planner) spreadNode(m *podMembers, candidates []int, groupSize int) (int, string) {
	load := map[int]int64{}
	pods := map[int]int{}
	for _, c := range pl.choices {
		if c.Group == m.key.Group {
			load[c.Node] += c.Weight
			pods[c.Node]++
		}
	}
	best := candidates[0]
	for _, n := range candidates[1:] {
		if load[n] < load[best] {
			best = n
		}
	}
	return best, fmt.Sprintf("Spread: %d of %d pods on node %d", pods[best]+1, groupSize, best)
}

// freestNode gives a new pod the candidate with the most free memory now.
func (pl *planner) freestNode(candidates []int, memFree map[int]uint64) (int, string) {
	for _, n := range candidates {
		if _, ok := memFree[n]; !ok {
			free, err := pl.in.MemFree(n)
			if err != nil {
				pl.in.Log.Error(err, "Reading free memory; counting it as none", "numaNode", n)
			}
			memFree[n] = free
		}
	}
	best := candidates[0]
	for _, n := range candidates[1:] {
		if memFree[n] > memFree[best] {
			best = n
		}
	}
	return best, fmt.Sprintf("MostFreeMemory: %d MiB free on node %d, the most of %s", memFree[best]>>20, best, numa.FormatList(candidates))
}

// followCPUs prefers the node holding most of the container's effective cpuset.cpus.
func (pl *planner) followCPUs(key desire.ContainerKey, d desire.Desire) Resolution {
	candidates, skip, msg := pl.candidates(d.Placement)
	if skip != "" {
		return Resolution{skip: skip, message: msg}
	}
	_, cs, err := pl.cgroupOf(key, d)
	if err != nil {
		return Resolution{skip: cgroupReason(err), message: err.Error()}
	}
	perNode, spans := pl.in.Topology.cpusPerNode(cs.CPUs)
	if len(cs.CPUs) == 0 || spans {
		cpus := numa.FormatList(cs.CPUs)
		if len(cs.CPUs) == 0 {
			cpus = "every CPU (no cpuset)"
		}
		return Resolution{skip: numav1.ReasonCPUsNotPinned,
			message: fmt.Sprintf("cpuset.cpus %s spans every NUMA node (%s): there is no node to follow", cpus, numa.FormatList(pl.in.Topology.nodes))}
	}
	if len(cs.Mems) > 0 {
		candidates = intersect(candidates, cs.Mems)
	}
	best, most := -1, 0
	for _, n := range candidates {
		if perNode[n] > most {
			best, most = n, perNode[n]
		}
	}
	if best < 0 {
		return Resolution{skip: numav1.ReasonCPUsPinnedElsewhere,
			message: fmt.Sprintf("cpuset.cpus %s lies on no node the container may prefer (%s)", numa.FormatList(cs.CPUs), describeCandidates(d.Placement, candidates))}
	}
	return Resolution{node: best, why: fmt.Sprintf("FollowCPUs: %d of %d CPUs of cpuset.cpus %s are on node %d", most, len(cs.CPUs), numa.FormatList(cs.CPUs), best)}
}

// intersect returns the ids of a that are in b, in a's order.
func intersect(a, b []int) []int {
	var out []int
	for _, n := range a {
		if slices.Contains(b, n) {
			out = append(out, n)
		}
	}
	return out
}

// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package plan

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
	"github.com/numapref/numapref/internal/nodeagent/desire"
	"github.com/numapref/numapref/internal/nodeagent/devices"
	"github.com/numapref/numapref/internal/numa"
)

// FollowDevices, per container: the NUMA node of the devices the kubelet allocated to it
// (those spec.devices names, or every one). The rule, which a user can read off inspect:
//   - every device on one node: that node;
//   - devices on several nodes: the node with the most of them, then the lowest id; and
//     where spec.nodes allows a set, the memory policy a container gets at creation is
//     MPOL_PREFERRED_MANY over the devices' nodes in that set (the prctl takes one node);
//   - a device without a NUMA node: DevicesWithoutTopology, no guess; a device on a node
//     the host does not have online: NodeNotPresent; no device: NoDevicesAllocated;
//     devices on no node the container may prefer (spec.nodes, cpuset.mems):
//     DevicesOnOtherNodes.
//
// Sticky as Spread's and MostFreeMemory's choices are: the choice is kept in the choices
// file, so a container keeps its node while the kubelet's answer is awaited or cannot be
// had (an agent restarted, a kubelet restarting); an answer that says otherwise wins.

// devicesChoiceKey is the sticky choice of FollowDevices container key: one per
// container, since each has devices of its own.
func devicesChoiceKey(key desire.ContainerKey, d desire.Desire) ChoiceKey {
	return ChoiceKey{PodUID: key.PodUID, Group: d.Placement.Group + " container " + key.Container}
}

// ChoiceKeyOf is the key of the sticky choice that d's container keeps: its pod's in its
// group, or, for FollowDevices, its own.
func ChoiceKeyOf(d desire.Desire) ChoiceKey {
	if d.Placement.Mode == numav1.PlacementModeFollowDevices {
		return devicesChoiceKey(d.Key(), d)
	}
	return ChoiceKey{PodUID: d.PodUID, Group: d.Placement.Group}
}

// resolveDevices resolves FollowDevices container key, keeping its sticky choice in step,
// and notes the choice as live.
func (pl *planner) resolveDevices(key desire.ContainerKey, d desire.Desire) Resolution {
	ck := devicesChoiceKey(key, d)
	pl.liveDevices[ck] = true
	kept, hasKept := pl.choices[ck]
	res := pl.followDevices(key, d)
	switch {
	case res.waiting && hasKept:
		// The answer is awaited or cannot be had: the container keeps its node.
		return Resolution{node: kept.Node, why: kept.Why, devices: res.devices}
	case res.skip != "" || res.waiting:
		if hasKept {
			delete(pl.choices, ck)
			pl.devicesChanged = true
		}
	case !hasKept || kept.Node != res.node || kept.Why != res.why:
		pl.choices[ck] = Choice{ChoiceKey: ck, Mode: numav1.PlacementModeFollowDevices, Node: res.node, Why: res.why}
		pl.devicesChanged = true
	}
	return res
}

// followDevices decides the node of FollowDevices container key from its devices.
func (pl *planner) followDevices(key desire.ContainerKey, d desire.Desire) Resolution {
	candidates, skip, msg := pl.candidates(d.Placement)
	if skip != "" {
		return Resolution{skip: skip, message: msg}
	}
	alloc := devices.Allocation{State: devices.Unreadable, Err: "the agent reads no device allocations (no PodResources socket configured)"}
	if pl.in.Devices != nil {
		alloc = pl.in.Devices(key, d)
	}
	switch alloc.State {
	case devices.Pending:
		return Resolution{skip: numav1.ReasonDeviceAllocationsPending, waiting: true,
			message: "asking the kubelet's PodResources API which devices the container has"}
	case devices.Unreadable:
		return Resolution{skip: numav1.ReasonDeviceAllocationsUnreadable, waiting: true, message: alloc.Err}
	}
	followed := slices.DeleteFunc(slices.Clone(alloc.Devices), func(dv devices.Device) bool {
		return !d.Placement.Devices.Follows(dv.ResourceName, dv.DeviceClassName)
	})
	res := Resolution{devices: followed}
	if reason, msg := pl.devicesUsable(followed, alloc.Devices, d.Placement.Devices); reason != "" {
		res.skip, res.message = reason, msg
		return res
	}
	_, cs, err := pl.cgroupOf(key, d)
	if err != nil {
		res.skip, res.message = cgroupReason(err), err.Error()
		return res
	}
	if len(cs.Mems) > 0 {
		candidates = intersect(candidates, cs.Mems)
	}
	perNode := map[int]int{}
	for _, dv := range followed {
		for _, n := range dv.Nodes {
			perNode[n]++
		}
	}
	var on []int // the candidates holding a device, most devices first, then the lowest id
	for _, n := range candidates {
		if perNode[n] > 0 {
			on = append(on, n)
		}
	}
	if len(on) == 0 {
		res.skip, res.message = numav1.ReasonDevicesOnOtherNodes, fmt.Sprintf("the container's devices are on NUMA node %s, and %s: %s",
			numa.FormatList(deviceNodes(followed)), describeCandidates(d.Placement, candidates), devices.Describe(followed))
		return res
	}
	slices.SortStableFunc(on, func(a, b int) int { return cmp.Or(-cmp.Compare(perNode[a], perNode[b]), cmp.Compare(a, b)) })
	res.node = on[0]
	res.why = devicesWhy(followed, perNode, on, alloc.AtCreation)
	if len(on) > 1 && allowsSet(d.Placement) {
		res.policyNodes = slices.Sorted(slices.Values(on))
	}
	return res
}

// devicesUsable returns why the followed devices give no node, or "": none followed, one
// without a node, one on a node this host does not have online. all are every device of
// the container, for the message.
func (pl *planner) devicesUsable(followed, all []devices.Device, filter desire.DeviceFilter) (string, string) {
	switch {
	case len(all) == 0:
		return numav1.ReasonNoDevicesAllocated, "the kubelet allocated no device to the container (device plugins' or DRA's)"
	case len(followed) == 0:
		return numav1.ReasonNoDevicesAllocated, fmt.Sprintf("none of the container's %d devices is of %s: %s",
			len(all), filter, devices.Describe(all))
	}
	var without, absent []devices.Device
	for _, dv := range followed {
		switch {
		case len(dv.Nodes) == 0:
			without = append(without, dv)
		case slices.ContainsFunc(dv.Nodes, func(n int) bool { return !pl.in.Topology.online[n] }):
			absent = append(absent, dv)
		}
	}
	switch {
	case len(without) > 0:
		return numav1.ReasonDevicesWithoutTopology, fmt.Sprintf("%d of the container's %d devices followed have no NUMA node "+
			"(a device plugin's TopologyInfo, a DRA device's numaNode attribute), and the agent does not guess one: %s",
			len(without), len(followed), devices.Describe(without))
	case len(absent) > 0:
		return numav1.ReasonNodeNotPresent, fmt.Sprintf("a device of the container is on a NUMA node this host does not have online "+
			"(online: %s): %s", numa.FormatList(pl.in.Topology.nodes), devices.Describe(absent))
	}
	return "", ""
}

// devicesWhy says how the node was chosen: "FollowDevices: 2 of 2 devices on node 1 (...)".
// It names no more than it must, so that it stays the same from pass to pass.
func devicesWhy(followed []devices.Device, perNode map[int]int, on []int, atCreation bool) string {
	var b strings.Builder
	fmt.Fprintf(&b, "FollowDevices: %d of %d devices on node %d", perNode[on[0]], len(followed), on[0])
	if len(on) > 1 {
		fmt.Fprintf(&b, ", the most of nodes %s (ties to the lowest id)", numa.FormatList(slices.Sorted(slices.Values(on))))
	}
	fmt.Fprintf(&b, " (%s)", devices.Describe(followed))
	if atCreation {
		b.WriteString("; read from the kubelet at the container's creation")
	}
	return b.String()
}

// allowsSet says whether the placement's spec.nodes allows more than one node: the memory
// policy may then name the devices' nodes together.
func allowsSet(p desire.Placement) bool { return strings.ContainsAny(p.Allowed, ",-") }

// deviceNodes are the nodes of ds, sorted.
func deviceNodes(ds []devices.Device) []int {
	var nodes []int
	for _, d := range ds {
		nodes = append(nodes, d.Nodes...)
	}
	slices.Sort(nodes)
	return slices.Compact(nodes)
}

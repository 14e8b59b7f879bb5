// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package nodeagent

import (
	"cmp"
	"slices"

	"github.com/numapref/numapref/internal/nodeagent/cgroups"
	"github.com/numapref/numapref/internal/nodeagent/devices"
	"github.com/numapref/numapref/internal/nodeagent/plan"
)

// ManagedContainer is a read-only view of one selected container (one the desired state
// names) as the engine's last pass left it. It is a copy: changing it changes nothing.
type ManagedContainer struct {
	PodNamespace string
	PodName      string
	// PodUID is the API's pod UID.
	PodUID    string
	Container string
	// Node is the preferred NUMA node the container should have (for the automatic modes,
	// the one chosen on this host); Mode says how it is chosen and Why, for the automatic
	// modes, how it was.
	Node int
	Mode string
	Why  string
	// Preference names the NumaPreference the node comes from; "" for an annotation.
	Preference string
	// Reason is Applied, or why the container was skipped or failed (the API's reasons);
	// Message says more.
	Reason  string
	Message string
	// Tasks counts the tasks that have the preferred node.
	Tasks int
	// PlacedAt says how the agent first placed the container (plan.Result.PlacedAt).
	PlacedAt string
	// Mechanism and Policy are plan.Result's: what gave the container its home, and the
	// memory policy its init holds when it was read.
	Mechanism, Policy string
	// Migration is where the move of the container's pages stands, when its plan asked
	// for one (plan.Result.Migrate); nil otherwise.
	Migration *plan.Migration
	// Devices are the devices a FollowDevices container follows (plan.Result.Devices).
	Devices []devices.Device
	// CgroupPath is the container's cgroup path relative to a hierarchy root, as
	// /proc/<pid>/cgroup shows it; CgroupDir is the absolute directory (under the
	// resolver's cgroup root; on cgroup v1, in the first task hierarchy that holds it)
	// whose task files the engine read. Both are "" when the engine did not list the
	// container's tasks on its last pass (a skipped container).
	CgroupPath string
	CgroupDir  string
	// TIDs are the container's tasks as the last pass listed them, and PIDs their
	// distinct processes (thread group ids), both sorted. A listing is a snapshot: tasks
	// may have exited or been born since.
	TIDs []int
	PIDs []int
}

// Managed returns the containers the engine was last asked to act on, sorted by pod
// namespace, pod name and container. It holds the engine's lock only to copy references
// (never during a pass's host reads), so it is cheap to call while passes run. Before
// the first SetDesired, and before the first pass after it, it returns what the engine
// knows then: nothing, or the previous pass's view.
func (e *Engine) Managed() []ManagedContainer {
	results, listings := e.published.view()
	out := make([]ManagedContainer, len(results))
	for i, r := range results {
		d := r.Desire
		mc := ManagedContainer{
			PodNamespace: d.Pod.Namespace, PodName: d.Pod.Name, PodUID: string(d.PodUID), Container: d.Container,
			Node: r.Node, Mode: string(d.Placement.Mode), Why: r.Why,
			Preference: d.Preference, Reason: r.Reason, Message: r.Message, Tasks: r.Tasks, PlacedAt: r.PlacedAt,
			Mechanism: r.Mechanism, Policy: r.Policy, Devices: r.Devices,
		}
		if r.Migrate {
			mg := r.Migration
			mc.Migration = &mg
		}
		if l := listings[i]; l.Cgroup != nil {
			mc.CgroupPath, mc.CgroupDir = l.Cgroup.Path, l.Cgroup.TasksDir
			mc.TIDs, mc.PIDs = taskIDs(l.Tasks)
		}
		out[i] = mc
	}
	slices.SortFunc(out, func(a, b ManagedContainer) int {
		return cmp.Or(cmp.Compare(a.PodNamespace, b.PodNamespace), cmp.Compare(a.PodName, b.PodName),
			cmp.Compare(a.Container, b.Container), cmp.Compare(a.PodUID, b.PodUID))
	})
	return out
}

// taskIDs returns the sorted thread ids and the sorted distinct process ids of tasks.
func taskIDs(tasks []cgroups.TaskRef) (tids, pids []int) {
	tids = make([]int, len(tasks))
	pids = make([]int, 0, 1)
	for i, t := range tasks {
		tids[i] = t.TID
		pids = append(pids, t.TGID)
	}
	slices.Sort(tids)
	slices.Sort(pids)
	return tids, slices.Compact(pids)
}

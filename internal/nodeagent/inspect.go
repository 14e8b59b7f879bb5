// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package nodeagent

import (
	"context"
	"errors"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
	"github.com/numapref/numapref/internal/inspect"
	"github.com/numapref/numapref/internal/nodeagent/cgroups"
	"github.com/numapref/numapref/internal/nodeagent/desire"
	"github.com/numapref/numapref/internal/nodeagent/devices"
	"github.com/numapref/numapref/internal/numa"
)

// PodGetter returns a pod by namespace and name; an error for which apierrors.IsNotFound
// holds means there is no such pod (the agent passes its cache, which holds only the
// pods of its node).
type PodGetter func(ctx context.Context, namespace, name string) (*corev1.Pod, error)

// PodInspector describes pods of this node for the inspect endpoint. Of a selected pod
// (one with a container the engine has a desire for): every container, selected or not,
// with its cgroup, cpuset and tasks read from the host now, and the engine's desire and
// last outcome for it. Of any other pod: only that no container is selected. It only reads: cgroup files, /proc, and
// the kernel backend's GET.
//
// The pod comes from pods, so a pod is known exactly when the agent's pod cache holds it;
// a pod deleted from the API is not described even while its containers still run or
// their undo is pending.
type PodInspector struct {
	node   *cgroups.NodeIdentity
	pods   PodGetter
	engine *Engine
}

var _ inspect.Describer = (*PodInspector)(nil)

// NewPodInspector makes the inspector of node, which reads pods with pods and the host
// through engine's resolver and kernel backend.
func NewPodInspector(node *cgroups.NodeIdentity, pods PodGetter, engine *Engine) *PodInspector {
	return &PodInspector{node: node, pods: pods, engine: engine}
}

// Describe implements inspect.Describer. A pod that does not exist or runs on another
// node yields an error wrapping inspect.ErrNotFound.
func (p *PodInspector) Describe(ctx context.Context, namespace, name string) (*inspect.Pod, error) {
	node := p.node.Node()
	pod, err := p.pods(ctx, namespace, name)
	if apierrors.IsNotFound(err) || err == nil && pod == nil {
		return nil, fmt.Errorf("pod %s/%s is not known on node %s: %w", namespace, name, node.Name, inspect.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("reading pod %s/%s: %w", namespace, name, err)
	}
	if pod.Spec.NodeName != node.Name {
		return nil, fmt.Errorf("pod %s/%s runs on node %q, not %s: %w", namespace, name, pod.Spec.NodeName, node.Name, inspect.ErrNotFound)
	}
	out := p.engine.InspectPod(node, pod)
	out.Node = node.Name
	return &out, nil
}

// InspectPod describes pod on this host, node, as the engine sees it: in detail when a
// container of it is selected, else only as not selected. It never sets anything.
func (e *Engine) InspectPod(node cgroups.Node, pod *corev1.Pod) inspect.Pod {
	support := e.cfg.Support
	out := inspect.Pod{
		APIVersion: inspect.APIVersion, Kind: inspect.Kind,
		Namespace: pod.Namespace, Name: pod.Name, UID: string(pod.UID), QOSClass: string(pod.Status.QOSClass),
		Kernel:     inspect.Kernel{Backend: support.Backend, Supported: support.Supported, Reason: support.Reason},
		Containers: []inspect.Container{},
	}
	uid := types.UID(node.PodUID(pod))
	desires := e.desires.of(uid)
	if len(desires) == 0 {
		// Not the agent's business: no container ids, cgroups or tasks of it.
		for _, c := range desire.PodContainers(pod) {
			out.Containers = append(out.Containers, inspect.Container{Name: c.Name, Init: c.Init, Reason: inspect.ReasonNotSelected, Tasks: []inspect.Task{}})
		}
		return out
	}
	out.Selected = true
	managed := map[string]ManagedContainer{}
	for _, m := range e.Managed() {
		if m.PodUID == string(uid) {
			managed[m.Container] = m
		}
	}
	statuses := desire.ContainerStatuses(pod)
	for _, c := range desire.PodContainers(pod) {
		ic := inspect.Container{Name: c.Name, Init: c.Init, ContainerID: statuses[c.Name].ContainerID, Tasks: []inspect.Task{}}
		m, hasManaged := managed[c.Name]
		e.describeDesire(&ic, desires[c.Name], m, hasManaged)
		ref := cgroups.ContainerRef{PodUID: string(uid), QOS: pod.Status.QOSClass, ContainerID: ic.ContainerID}
		e.describeHost(&ic, ref, m.TIDs)
		out.Containers = append(out.Containers, ic)
	}
	return out
}

// describeDesire fills in what the agent wants for the container and the outcome of the
// engine's last pass, which counts only when it was for the current desire.
func (e *Engine) describeDesire(ic *inspect.Container, d *desire.Desire, m ManagedContainer, hasManaged bool) {
	if d == nil {
		ic.Reason = inspect.ReasonNotSelected
		return
	}
	current := hasManaged && m.Preference == d.Preference && m.Mode == string(d.Placement.Mode) &&
		(d.Placement.Automatic() || m.Node == d.Node)
	if d.Refusal != numav1.ReasonInvalidAnnotation {
		ic.Mode = string(d.Placement.Mode)
		switch {
		case !d.Placement.Automatic():
			ic.DesiredNode = &d.Node
		case current && m.Reason == numav1.ReasonApplied:
			node := m.Node
			ic.DesiredNode, ic.Why = &node, m.Why
		}
		ic.Source = "annotation"
		if d.Preference != "" {
			ic.Source = "NumaPreference/" + d.Preference
		}
	}
	switch {
	case current:
		ic.Reason, ic.Message, ic.ManagedTasks, ic.PlacedAt = m.Reason, m.Message, m.Tasks, m.PlacedAt
		ic.Mechanism, ic.MemoryPolicy, ic.Devices = m.Mechanism, m.Policy, inspectDevices(m.Devices)
		if mg := m.Migration; mg != nil {
			ic.Migration = &inspect.Migration{Node: mg.Node, State: mg.State, Ended: mg.Ended,
				PagesMoved: mg.Moved, PagesNotMoved: mg.NotMoved, Error: mg.Error}
		}
	case d.Refusal != "":
		ic.Reason, ic.Message = d.Refusal, d.Message
	default:
		ic.Reason, ic.Message = inspect.ReasonPending, "the engine has not run a pass for this desire yet"
	}
}

// describeHost reads the container's cgroup, cpuset and tasks, and each task's forced and
// effective preferred node. listed are the tasks the engine's last pass listed.
func (e *Engine) describeHost(ic *inspect.Container, ref cgroups.ContainerRef, listed []int) {
	if ref.ContainerID == "" {
		ic.CgroupError = "the container has not started: no container ID in pod status"
		return
	}
	r := e.cfg.Resolver
	cg, err := r.Resolve(ref)
	if err != nil {
		ic.CgroupError = err.Error()
		return
	}
	ic.Cgroup = &inspect.Cgroup{Path: cg.Path, TasksDir: cg.TasksDir, CpusetDir: cg.CpusetDir}
	if cs, err := r.Cpuset(cg); err != nil {
		ic.CpusetError = err.Error()
	} else {
		cs.Mems, cs.CPUs = nonNil(cs.Mems), nonNil(cs.CPUs)
		ic.Cpuset = &cs
	}
	tasks, err := r.ListTIDs(cg)
	if err != nil {
		ic.TasksError = err.Error()
		return
	}
	for _, t := range tasks {
		it := inspect.Task{TID: t.TID, TGID: t.TGID, Listed: slices.Contains(listed, t.TID)}
		e.readForced(&it)
		readEffective(&it, e.cfg.ProcRoot)
		ic.Tasks = append(ic.Tasks, it)
	}
}

// readForced asks the kernel backend for the task's forced node. prctl is never called
// on a kernel that did not prove support (the option number means something else on
// mainline). The emulator's GET may record, for a task it has not seen, the value the
// kernel would hold (its bookkeeping); it never changes a value.
func (e *Engine) readForced(it *inspect.Task) {
	if !e.cfg.Support.Supported {
		it.ForcedError = "the kernel backend is not usable: " + e.cfg.Support.Reason
		return
	}
	v, err := e.cfg.Kernel.Get(it.TID)
	if err != nil {
		it.ForcedError = err.Error()
		return
	}
	it.Forced = &v
}

// readEffective reads numa_preferred_nid from <procRoot>/<tid>/sched.
func readEffective(it *inspect.Task, procRoot string) {
	s, err := numa.ReadSchedNUMA(procRoot, it.TID)
	switch {
	case errors.Is(err, numa.ErrTaskGone):
		it.EffectiveError = "the task exited"
	case err != nil:
		it.EffectiveError = err.Error()
	case !s.Present:
		it.EffectiveError = "the kernel shows no numa_preferred_nid (built without NUMA balancing or scheduler debug)"
	default:
		v := s.PreferredNID
		it.Effective = &v
	}
}

func nonNil(s []int) []int {
	if s == nil {
		return []int{}
	}
	return s
}

// inspectDevices are ds in the inspect schema.
func inspectDevices(ds []devices.Device) []inspect.Device {
	var out []inspect.Device
	for _, d := range ds {
		out = append(out, inspect.Device{ResourceName: d.ResourceName, Driver: d.Driver, Pool: d.Pool, Claim: d.Claim,
			DeviceClassName: d.DeviceClassName, ID: d.ID, Nodes: d.Nodes})
	}
	return out
}

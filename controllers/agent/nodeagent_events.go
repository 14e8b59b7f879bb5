// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
	"github.com/numapref/numapref/internal/nodeagent/desire"
	"github.com/numapref/numapref/internal/nodeagent/plan"
)

// recordEvents emits pod Events when something a user acts on changes, never because a
// count moved: one Applied Event per pod naming its containers and their node (not one per
// container: a rollout of many pods would queue an Event storm behind the client's rate
// limiter), one Warning per container and reason, and one Conflict Event per pod. Counts
// live in the status and the metrics; a Warning's message is the first one of its reason,
// and a churning container whose count changes every pass gets no new Event.
func (r *NodeAgentReconciler) recordEvents(plans []podPlan, results map[desire.ContainerKey]plan.Result, facts NodeFacts) {
	seen := map[desire.ContainerKey]bool{}
	seenPods := map[types.UID]bool{}
	for _, p := range plans {
		seenPods[p.pod.UID] = true
		r.recordConflict(p)
		r.warnIgnoredMirror(p.pod)
		applied := r.recordOutcomes(p, results, seen)
		r.recordApplied(p.pod, applied)
		r.warnIneffective(p.pod, len(applied) > 0, facts)
	}
	r.forgetEvents(seen, seenPods)
}

// recordConflict gives the pod one Conflict Event each time the containers that follow
// another source than the NumaPreferences selecting them change.
func (r *NodeAgentReconciler) recordConflict(p podPlan) {
	msg := conflictMessage(p.plan)
	if msg == r.conflicts[p.pod.UID] {
		return
	}
	r.conflicts[p.pod.UID] = msg
	if msg != "" {
		r.recorder.Eventf(p.pod, nil, corev1.EventTypeNormal, "Conflict", "Select", "%s", msg)
	}
}

// recordOutcomes gives the pod a Warning per container whose reason changed to one that
// warns, notes in seen the containers the engine acted on, and returns those applied.
func (r *NodeAgentReconciler) recordOutcomes(p podPlan, results map[desire.ContainerKey]plan.Result, seen map[desire.ContainerKey]bool) []plan.Result {
	var applied []plan.Result
	for _, d := range p.plan.Desires {
		res, ok := results[d.Key()]
		if !ok || res.Desire != d {
			continue // not acted on yet
		}
		seen[d.Key()] = true
		if res.Reason == numav1.ReasonApplied {
			applied = append(applied, res)
		}
		if r.reported[d.Key()] == res.Reason {
			continue
		}
		r.reported[d.Key()] = res.Reason
		if warns(p.pod, res.Reason) {
			r.recorder.Eventf(p.pod, nil, corev1.EventTypeWarning, res.Reason, "SetPreferredNode",
				"container %s: %s", d.Container, res.Message)
		}
	}
	return applied
}

// recordApplied gives the pod one Applied Event each time what its applied containers
// prefer, and why, changes.
func (r *NodeAgentReconciler) recordApplied(pod *corev1.Pod, applied []plan.Result) {
	msg := appliedMessage(applied)
	if msg == r.applied[pod.UID] {
		return
	}
	r.applied[pod.UID] = msg
	if msg != "" {
		r.recorder.Eventf(pod, nil, corev1.EventTypeNormal, numav1.ReasonApplied, "SetPreferredNode", "%s", msg)
	}
}

// warnIneffective says once per pod that it is placed but the kernel ignores the
// preference: kernel.numa_balancing is disabled on the node.
func (r *NodeAgentReconciler) warnIneffective(pod *corev1.Pod, placed bool, facts NodeFacts) {
	ineffective := placed && !facts.BalancingEnabled()
	if ineffective == r.ineffective[pod.UID] {
		return
	}
	r.ineffective[pod.UID] = ineffective
	if ineffective {
		r.recorder.Eventf(pod, nil, corev1.EventTypeWarning, numav1.ReasonNumaBalancingDisabled, "SetPreferredNode",
			"kernel.numa_balancing is %s on node %s: the kernel ignores the preferred node until it is enabled", facts.NUMABalancing, r.nodeName)
	}
}

// forgetEvents drops what the Events remembered of containers and pods no longer planned,
// so that one that comes back is told again.
func (r *NodeAgentReconciler) forgetEvents(seen map[desire.ContainerKey]bool, seenPods map[types.UID]bool) {
	for k := range r.reported {
		if !seen[k] {
			delete(r.reported, k)
		}
	}
	for _, m := range []map[types.UID]string{r.conflicts, r.applied} {
		for uid := range m {
			if !seenPods[uid] {
				delete(m, uid)
			}
		}
	}
	for _, m := range []map[types.UID]bool{r.ineffective, r.mirrorIgnored} {
		for uid := range m {
			if !seenPods[uid] {
				delete(m, uid)
			}
		}
	}
}

// warnIgnoredMirror says once per pod that its mirror-pod annotation is ignored: the pod is
// not a mirror pod its node's kubelet made (cgroups.Node.IsMirrorPod), so the agent acts on the
// pod's own cgroup and not on the static pod's that the annotation names.
func (r *NodeAgentReconciler) warnIgnoredMirror(pod *corev1.Pod) {
	if r.mirrorIgnored[pod.UID] || !r.opts.Node.Node().IgnoresMirrorAnnotation(pod) {
		return
	}
	r.mirrorIgnored[pod.UID] = true
	r.recorder.Eventf(pod, nil, corev1.EventTypeWarning, numav1.ReasonMirrorAnnotationIgnored, "Select",
		"annotation kubernetes.io/config.mirror ignored: the pod is not a mirror pod of node %s's kubelet (not controlled by its Node); its own cgroup is used", r.nodeName)
}

// warns tells whether a container's outcome gets a Warning Event, as the reason table
// says, but for a terminating pod's ContainerNotFound: the runtime removed its cgroups
// before kubelet said so.
func warns(pod *corev1.Pod, reason string) bool {
	if reason == numav1.ReasonContainerNotFound && pod.DeletionTimestamp != nil {
		return false
	}
	return numav1.LookupReason(reason).Warning
}

// appliedMessage says which containers of a pod prefer which node, and why, grouped by node
// and source: "prefers NUMA node 0 (NumaPreference db): containers app, log", or for an
// automatic mode "prefers NUMA node 1 (NumaPreference db, Spread: 2 of 4 pods on node 1):
// container app". The why of a sticky choice is the one of its moment: it does not change
// when more pods come, so neither does the Event.
func appliedMessage(applied []plan.Result) string {
	groups := map[string][]string{}
	for _, r := range applied {
		source := desireSource(r.Desire)
		if r.Why != "" {
			source += ", " + r.Why
		}
		head := fmt.Sprintf("prefers NUMA node %d (%s)", r.Node, source)
		groups[head] = append(groups[head], r.Desire.Container)
	}
	var parts []string
	for _, head := range slices.Sorted(maps.Keys(groups)) {
		names := groups[head]
		slices.Sort(names)
		noun := "containers"
		if len(names) == 1 {
			noun = "container"
		}
		parts = append(parts, fmt.Sprintf("%s: %s %s", head, noun, strings.Join(names, ", ")))
	}
	return strings.Join(parts, "; ")
}

func desireSource(d desire.Desire) string {
	if d.Preference == "" {
		return "pod annotation"
	}
	return "NumaPreference " + d.Preference
}

func conflictMessage(pp desire.PodPlan) string {
	var parts []string
	for _, c := range pp.Conflicts {
		parts = append(parts, fmt.Sprintf("container %s follows %s, not NumaPreference %s", c.Container, c.Winner, c.Preference))
	}
	slices.Sort(parts)
	return strings.Join(slices.Compact(parts), "; ")
}

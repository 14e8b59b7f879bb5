package controllers

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
)

// Reasons that say a container is governed by another source: they feed the Conflict
// condition, not Ready or Degraded.
var conflictReasons = map[string]bool{
	numav1.ReasonOverriddenByAnnotation: true,
	numav1.ReasonOverriddenByPreference: true,
}

// summarize computes the summary and conditions of a NumaPreference from its node entries.
// It returns a new status with the node entries left as they are.
func summarize(pref *numav1.NumaPreference) numav1.NumaPreferenceStatus {
	st := *pref.Status.DeepCopy()
	st.ObservedGeneration = pref.Generation
	st.Summary = numav1.Summary{}
	problems, conflicts := map[string]int32{}, map[string]int32{}
	pending := int32(0)
	for _, n := range pref.Status.Nodes {
		st.Summary.Nodes++
		st.Summary.Pods += n.Pods
		st.Summary.Containers += n.Containers
		st.Summary.Tasks += n.Tasks
		for _, s := range n.Skipped {
			switch {
			case conflictReasons[s.Reason]:
				conflicts[s.Reason] += s.Count
			case s.Reason == numav1.ReasonContainerNotRunning:
				pending += s.Count
			default:
				problems[s.Reason] += s.Count
			}
		}
		for _, f := range n.Failed {
			problems[f.Reason] += f.Count
		}
	}

	ready := metav1.Condition{Type: numav1.ConditionReady, ObservedGeneration: pref.Generation}
	switch {
	case st.Summary.Pods == 0:
		ready.Status, ready.Reason = metav1.ConditionFalse, numav1.ReasonNoMatchingPods
		ready.Message = "no pod governed by this preference runs on a node with an agent"
	case len(problems) > 0 || pending > 0:
		ready.Status, ready.Reason = metav1.ConditionFalse, numav1.ReasonPartiallyApplied
		ready.Message = fmt.Sprintf("%d containers placed; %s", st.Summary.Containers, describeCounts(problems, pending))
	default:
		ready.Status, ready.Reason = metav1.ConditionTrue, numav1.ReasonApplied
		ready.Message = fmt.Sprintf("%d containers (%d tasks) on %d nodes prefer NUMA node %d",
			st.Summary.Containers, st.Summary.Tasks, st.Summary.Nodes, ptrValue(pref.Spec.Node))
	}
	meta.SetStatusCondition(&st.Conditions, ready)

	degraded := metav1.Condition{Type: numav1.ConditionDegraded, ObservedGeneration: pref.Generation,
		Status: metav1.ConditionFalse, Reason: numav1.ReasonNoProblems, Message: "no container was refused"}
	if len(problems) > 0 {
		degraded.Status, degraded.Reason = metav1.ConditionTrue, topReason(problems)
		degraded.Message = describeCounts(problems, 0)
	}
	meta.SetStatusCondition(&st.Conditions, degraded)

	conflict := metav1.Condition{Type: numav1.ConditionConflict, ObservedGeneration: pref.Generation,
		Status: metav1.ConditionFalse, Reason: numav1.ReasonNoConflict, Message: "no selected container follows another source"}
	if len(conflicts) > 0 {
		conflict.Status, conflict.Reason = metav1.ConditionTrue, topReason(conflicts)
		conflict.Message = describeCounts(conflicts, 0) + " (see the pods' Conflict events)"
	}
	meta.SetStatusCondition(&st.Conditions, conflict)
	return st
}

// topReason is the reason with the highest count, ties broken by name.
func topReason(m map[string]int32) string {
	keys := slices.SortedFunc(maps.Keys(m), func(a, b string) int {
		if c := cmp.Compare(m[b], m[a]); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	return keys[0]
}

func describeCounts(m map[string]int32, pending int32) string {
	var parts []string
	for _, r := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s: %d", r, m[r]))
	}
	if pending > 0 {
		parts = append(parts, fmt.Sprintf("%d containers not running yet", pending))
	}
	return strings.Join(parts, ", ")
}

func ptrValue(p *int32) int32 {
	if p == nil {
		return -1
	}
	return *p
}

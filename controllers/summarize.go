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

// tally adds up the entries the node reports have for one preference.
type tally struct {
	summary                       numav1.Summary
	problems, conflicts, noEffect map[string]int32
	pending, behind               int32 // containers not running yet; nodes on an older generation
	// unreported counts the nodes whose report is full and may have left the preference
	// out (mayHaveOmitted): what they did for it is unknown.
	unreported        int32
	nodes             []numav1.NodeProblem
	ineffectiveNodes  []string
	unrestrictedNodes []string // their reports say the node restriction is missing
}

func tallyReports(pref *numav1.NumaPreference, reports []numav1.NumaNodeReport) tally {
	t := tally{problems: map[string]int32{}, conflicts: map[string]int32{}, noEffect: map[string]int32{}}
	for i := range reports {
		rep := &reports[i]
		e, ok := findEntry(rep, pref.Namespace, pref.Name)
		if !ok {
			if mayHaveOmitted(rep, pref.Namespace, pref.Name) {
				t.unreported++
			}
			continue
		}
		if restrictionMissing(rep) {
			t.unrestrictedNodes = append(t.unrestrictedNodes, rep.Name)
		}
		if e.Pods > 0 {
			t.summary.Nodes++
		}
		t.summary.Pods += e.Pods
		t.summary.Containers += e.Containers
		t.summary.Tasks += e.Tasks
		if e.Generation != pref.Generation {
			t.behind++
		}
		node := map[string]int32{}
		for _, list := range [][]numav1.ReasonCount{e.Skipped, e.Failed, e.Ineffective} {
			for _, c := range list {
				t.count(node, c)
			}
		}
		if withoutEffect(node) {
			t.ineffectiveNodes = append(t.ineffectiveNodes, rep.Name)
		}
		if len(node) > 0 {
			var total int32
			for _, n := range node {
				total += n
			}
			t.nodes = append(t.nodes, numav1.NodeProblem{NodeName: rep.Name, Reason: topReason(node), Count: total})
		}
	}
	return t
}

// count adds one count of a node's entry where the reason table says it belongs: a
// conflict, a container without effect, a problem, or else a container not running yet.
func (t *tally) count(node map[string]int32, c numav1.ReasonCount) {
	info := numav1.LookupReason(c.Reason)
	switch {
	case info.Conflict:
		t.conflicts[c.Reason] += c.Count
	case info.Ineffective:
		node[c.Reason] += c.Count
		t.noEffect[c.Reason] += c.Count
	case info.Problem:
		node[c.Reason] += c.Count
		t.problems[c.Reason] += c.Count
	default:
		t.pending += c.Count
	}
}

// withoutEffect tells whether a node's counts hold containers the kernel ignores.
func withoutEffect(node map[string]int32) bool {
	for reason := range node {
		if numav1.LookupReason(reason).Ineffective {
			return true
		}
	}
	return false
}

// mayHaveOmitted says whether report rep, which has no entry for the preference
// namespace/name, may have left it out. The agent takes each namespace's entries in turn,
// one a round, in name order (nodeagent.BoundReports), until the report is full: in the
// last round, R, some namespaces got their R-th entry and the others stopped at R-1. A
// namespace with fewer than R-1 entries kept had no more, and within a namespace a name
// before one kept would have been kept: both select nothing on that node. So one
// namespace's thousand preferences leave the others' summaries as they were.
func mayHaveOmitted(rep *numav1.NumaNodeReport, namespace, name string) bool {
	if rep.Status.OmittedPreferences <= 0 {
		return false
	}
	kept := map[string]int{}
	rounds := 0
	for _, e := range rep.Status.Preferences {
		if e.Namespace == namespace && e.Name > name {
			return false
		}
		kept[e.Namespace]++
		rounds = max(rounds, kept[e.Namespace])
	}
	return kept[namespace] >= rounds-1
}

func findEntry(rep *numav1.NumaNodeReport, namespace, name string) (numav1.PreferenceReport, bool) {
	for _, e := range rep.Status.Preferences {
		if e.Namespace == namespace && e.Name == name {
			return e, true
		}
	}
	return numav1.PreferenceReport{}, false
}

// summarize computes the status of a NumaPreference from the reports of the nodes.
func summarize(pref *numav1.NumaPreference, reports []numav1.NumaNodeReport) numav1.NumaPreferenceStatus {
	t := tallyReports(pref, reports)
	st := *pref.Status.DeepCopy()
	st.ObservedGeneration = pref.Generation
	st.Summary = t.summary
	st.ProblemNodes = problemNodes(t.nodes)

	gen := pref.Generation
	ready := metav1.Condition{Type: numav1.ConditionReady, ObservedGeneration: gen}
	switch {
	case t.summary.Pods == 0 && t.unreported == 0:
		ready.Status, ready.Reason = metav1.ConditionFalse, numav1.ReasonNoMatchingPods
		ready.Message = "no pod governed by this preference runs on a node with an agent"
	case len(t.problems) > 0 || t.pending > 0 || t.behind > 0 || t.unreported > 0:
		ready.Status, ready.Reason = metav1.ConditionFalse, numav1.ReasonPartiallyApplied
		ready.Message = fmt.Sprintf("%d containers placed; %s", t.summary.Containers, describeCounts(t.problems, t.pending, t.behind, t.unreported))
	default:
		ready.Status, ready.Reason = metav1.ConditionTrue, numav1.ReasonApplied
		ready.Message = fmt.Sprintf("%d containers (%d tasks) on %d nodes prefer %s",
			t.summary.Containers, t.summary.Tasks, t.summary.Nodes, describeTarget(pref))
	}
	meta.SetStatusCondition(&st.Conditions, ready)

	degraded := metav1.Condition{Type: numav1.ConditionDegraded, ObservedGeneration: gen,
		Status: metav1.ConditionFalse, Reason: numav1.ReasonNoProblems, Message: "no container was refused"}
	if len(t.problems) > 0 {
		degraded.Status, degraded.Reason = metav1.ConditionTrue, topReason(t.problems)
		degraded.Message = describeCounts(t.problems, 0, 0, 0) + " (kubectl numapref status lists the nodes)"
	}
	meta.SetStatusCondition(&st.Conditions, degraded)

	conflict := metav1.Condition{Type: numav1.ConditionConflict, ObservedGeneration: gen,
		Status: metav1.ConditionFalse, Reason: numav1.ReasonNoConflict, Message: "no selected container follows another source"}
	if len(t.conflicts) > 0 {
		conflict.Status, conflict.Reason = metav1.ConditionTrue, topReason(t.conflicts)
		conflict.Message = describeCounts(t.conflicts, 0, 0, 0) + " (see the pods' Conflict events)"
	}
	meta.SetStatusCondition(&st.Conditions, conflict)

	meta.SetStatusCondition(&st.Conditions, effective(t, gen))
	if len(t.unrestrictedNodes) > 0 {
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: numav1.ConditionNodeRestricted, ObservedGeneration: gen,
			Status: metav1.ConditionFalse, Reason: numav1.ReasonNodeRestrictionMissing,
			Message: fmt.Sprintf("the node restriction policy does not hold the agents of nodes %s: any agent could have written the reports this status adds up (see their Nodes' events)",
				someNodes(t.unrestrictedNodes))})
	} else {
		meta.RemoveStatusCondition(&st.Conditions, numav1.ConditionNodeRestricted)
	}
	return st
}

// effective says whether the kernel acts on the placed containers' preference: it ignores
// it on a node whose kernel.numa_balancing is disabled.
func effective(t tally, gen int64) metav1.Condition {
	c := metav1.Condition{Type: numav1.ConditionEffective, ObservedGeneration: gen}
	var ineffective int32
	for _, n := range t.noEffect {
		ineffective += n
	}
	switch {
	case t.summary.Containers == 0:
		c.Status, c.Reason = metav1.ConditionUnknown, numav1.ReasonNoPlacedContainers
		c.Message = "no container is placed yet"
	case ineffective > 0:
		c.Status, c.Reason = metav1.ConditionFalse, topReason(t.noEffect)
		c.Message = fmt.Sprintf("%d of %d placed containers run where kernel.numa_balancing is disabled, so the kernel ignores their preferred node (nodes %s)",
			ineffective, t.summary.Containers, someNodes(t.ineffectiveNodes))
	default:
		c.Status, c.Reason = metav1.ConditionTrue, numav1.ReasonNumaBalancingEnabled
		c.Message = fmt.Sprintf("NUMA balancing is enabled where the %d placed containers run", t.summary.Containers)
	}
	return c
}

// someNodes names the first three nodes by name, and counts the rest.
func someNodes(nodes []string) string {
	nodes = slices.Sorted(slices.Values(nodes))
	if len(nodes) > 3 {
		return fmt.Sprintf("%s and %d more", strings.Join(nodes[:3], ", "), len(nodes)-3)
	}
	return strings.Join(nodes, ", ")
}

// problemNodes keeps the MaxProblemNodes nodes with the most problems, most first, ties by name.
func problemNodes(nodes []numav1.NodeProblem) []numav1.NodeProblem {
	slices.SortFunc(nodes, func(a, b numav1.NodeProblem) int {
		return cmp.Or(cmp.Compare(b.Count, a.Count), cmp.Compare(a.NodeName, b.NodeName))
	})
	if len(nodes) > numav1.MaxProblemNodes {
		nodes = nodes[:numav1.MaxProblemNodes]
	}
	if len(nodes) == 0 {
		return nil
	}
	return nodes
}

func describeTarget(pref *numav1.NumaPreference) string {
	if pref.Spec.Node != nil && (pref.Spec.Mode == "" || pref.Spec.Mode == numav1.PlacementModeStatic) {
		return fmt.Sprintf("NUMA node %d", *pref.Spec.Node)
	}
	return fmt.Sprintf("the NUMA node %s chose on each host", pref.Spec.Mode)
}

// topReason is the reason with the highest count, ties broken by name.
func topReason(m map[string]int32) string {
	keys := slices.SortedFunc(maps.Keys(m), func(a, b string) int {
		return cmp.Or(cmp.Compare(m[b], m[a]), cmp.Compare(a, b))
	})
	return keys[0]
}

func describeCounts(m map[string]int32, pending, behind, unreported int32) string {
	var parts []string
	for _, r := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s: %d", r, m[r]))
	}
	if pending > 0 {
		parts = append(parts, fmt.Sprintf("%d containers not running yet", pending))
	}
	if behind > 0 {
		parts = append(parts, fmt.Sprintf("%d nodes have not acted on the latest spec yet", behind))
	}
	if unreported > 0 {
		parts = append(parts, fmt.Sprintf("%d nodes' reports are full and may leave this preference out (omittedPreferences)", unreported))
	}
	return strings.Join(parts, ", ")
}

// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package summarizer

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
	"github.com/numapref/numapref/controllers/internal/status"
)

// tally adds up the entries the node reports have for one preference. It adds in int64:
// each count is at most MaxEntryCount, but thousands of nodes can pass 2^31-1 together;
// the status gets the sums saturated at math.MaxInt32 (saturate).
type tally struct {
	nodes, pods, containers, tasks, memoryPolicy int64 // the summary: nodes that report pods, and the sums
	problems, conflicts, noEffect                map[string]int64
	pending                                      int64 // containers not running yet
	behind                                       int32 // nodes on an older generation
	// unreported counts the nodes whose report is full and may have left the preference
	// out (mayHaveOmitted): what they did for it is unknown.
	unreported        int32
	problemNodes      []numav1.NodeProblem
	ineffectiveNodes  []string
	unrestrictedNodes []string  // their reports say the node restriction is missing
	refused           []refusal // entries not added up (InvalidReport)
}

// refusal is a node whose entry for the preference failed checkEntry, and why.
type refusal struct {
	node string
	err  error
}

func tallyReports(pref *numav1.NumaPreference, reports []numav1.NumaNodeReport) tally {
	t := tally{problems: map[string]int64{}, conflicts: map[string]int64{}, noEffect: map[string]int64{}}
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
		if err := checkEntry(&e); err != nil {
			t.refuse(rep.Name, err)
			continue
		}
		t.add(rep.Name, pref.Generation, &e)
	}
	return t
}

// add adds up node's entry e, which checkEntry passed.
func (t *tally) add(node string, generation int64, e *numav1.PreferenceReport) {
	if e.Pods > 0 {
		t.nodes++
	}
	t.pods += int64(e.Pods)
	t.containers += int64(e.Containers)
	t.tasks += int64(e.Tasks)
	t.memoryPolicy += int64(e.MemoryPolicy)
	if e.Generation != generation {
		t.behind++
	}
	counts := map[string]int64{}
	for _, list := range status.ReasonLists(e) {
		for _, c := range list {
			t.count(counts, c)
		}
	}
	if withoutEffect(counts) {
		t.ineffectiveNodes = append(t.ineffectiveNodes, node)
	}
	if len(counts) > 0 {
		var total int64
		for _, n := range counts {
			total += n
		}
		t.problemNodes = append(t.problemNodes, numav1.NodeProblem{NodeName: node, Reason: topReason(counts), Count: saturate(total)})
	}
}

// refuse counts node, whose entry failed checkEntry, as one InvalidReport problem: none of
// the entry's counts, and none of its reasons, reaches the status.
func (t *tally) refuse(node string, err error) {
	t.refused = append(t.refused, refusal{node: node, err: err})
	t.problems[numav1.ReasonInvalidReport]++
	t.problemNodes = append(t.problemNodes, numav1.NodeProblem{NodeName: node, Reason: numav1.ReasonInvalidReport, Count: 1})
}

// summary is what the status shows of the sums.
func (t *tally) summary() numav1.Summary {
	return numav1.Summary{Nodes: saturate(t.nodes), Pods: saturate(t.pods), Containers: saturate(t.containers), Tasks: saturate(t.tasks),
		MemoryPolicy: saturate(t.memoryPolicy)}
}

// saturate stores a sum in an int32 field of the status: at most math.MaxInt32, never
// below 0.
func saturate(n int64) int32 {
	return int32(min(max(n, 0), math.MaxInt32))
}

// checkEntry says why the summarizer must not add up a report entry, or nil. Each agent
// writes its own node's report, so a buggy or compromised one can write anything the CRD
// accepts, or more: a reason that is no condition reason would make the preference's
// status unwritable (its conditions carry the top reasons), and counts past any node's
// size would wrap or swamp the sums. So every reason must be one of the reason table, and
// every count within 0..MaxEntryCount.
func checkEntry(e *numav1.PreferenceReport) error {
	for _, c := range []numav1.ReasonCount{{Reason: "pods", Count: e.Pods}, {Reason: "containers", Count: e.Containers}, {Reason: "tasks", Count: e.Tasks},
		{Reason: "memoryPolicy", Count: e.MemoryPolicy}} {
		if err := checkCount(c); err != nil {
			return err
		}
	}
	for _, list := range status.ReasonLists(e) {
		for _, c := range list {
			if !numav1.KnownReason(c.Reason) {
				return fmt.Errorf("unknown reason %.64q", c.Reason)
			}
			if err := checkCount(c); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkCount checks that count c of an entry is within 0..MaxEntryCount; its reason names
// what it counts.
func checkCount(c numav1.ReasonCount) error {
	if c.Count < 0 || c.Count > numav1.MaxEntryCount {
		return fmt.Errorf("%s count %d is outside 0..%d", c.Reason, c.Count, numav1.MaxEntryCount)
	}
	return nil
}

// restrictionMissing tells whether a node's report says the node restriction does not hold
// its agent (the agent's node restriction check).
func restrictionMissing(rep *numav1.NumaNodeReport) bool {
	return meta.IsStatusConditionFalse(rep.Status.Conditions, numav1.ConditionNodeRestricted)
}

// logRefused names, with each status write, the nodes whose entry the status does not add
// up (InvalidReport), and why: the first MaxProblemNodes, as the status does.
func logRefused(log logr.Logger, refused []refusal) {
	for i, r := range refused {
		if i == numav1.MaxProblemNodes {
			log.Info("More report entries not added up", "count", len(refused)-i)
			return
		}
		log.Info("Did not add up a node's report entry (InvalidReport)", "node", r.node, "why", r.err.Error())
	}
}

// count adds one count of a node's entry where the reason table says it belongs: a
// conflict, a container without effect, a problem, or else a container not running yet.
func (t *tally) count(node map[string]int64, c numav1.ReasonCount) {
	info := numav1.LookupReason(c.Reason)
	n := int64(c.Count)
	switch {
	case info.Conflict:
		t.conflicts[c.Reason] += n
	case info.Ineffective:
		node[c.Reason] += n
		t.noEffect[c.Reason] += n
	case info.Problem:
		node[c.Reason] += n
		t.problems[c.Reason] += n
	default:
		t.pending += n
	}
}

// withoutEffect tells whether a node's counts hold containers the kernel ignores.
func withoutEffect(node map[string]int64) bool {
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

// summarize computes the status of a NumaPreference from the reports of the nodes, and
// names the entries it did not add up (checkEntry).
func summarize(pref *numav1.NumaPreference, reports []numav1.NumaNodeReport) (numav1.NumaPreferenceStatus, []refusal) {
	t := tallyReports(pref, reports)
	st := *pref.Status.DeepCopy()
	st.ObservedGeneration = pref.Generation
	st.Summary = t.summary()
	st.ProblemNodes = problemNodes(t.problemNodes)

	gen := pref.Generation
	meta.SetStatusCondition(&st.Conditions, ready(pref, &t))

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

	meta.SetStatusCondition(&st.Conditions, effective(&t, gen))
	if len(t.unrestrictedNodes) > 0 {
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: numav1.ConditionNodeRestricted, ObservedGeneration: gen,
			Status: metav1.ConditionFalse, Reason: numav1.ReasonNodeRestrictionMissing,
			Message: fmt.Sprintf("the node restriction policy does not hold the agents of nodes %s: any agent could have written the reports this status adds up (see their Nodes' events)",
				someNodes(t.unrestrictedNodes))})
	} else {
		meta.RemoveStatusCondition(&st.Conditions, numav1.ConditionNodeRestricted)
	}
	return st, t.refused
}

// ready says whether every container the preference governs has its preferred node. A
// node whose entry was refused, or whose full report may have left the preference out, is
// one whose state is unknown: not ready.
func ready(pref *numav1.NumaPreference, t *tally) metav1.Condition {
	sum := t.summary()
	c := metav1.Condition{Type: numav1.ConditionReady, ObservedGeneration: pref.Generation}
	switch {
	case sum.Pods == 0 && t.unreported == 0 && len(t.refused) == 0:
		c.Status, c.Reason = metav1.ConditionFalse, numav1.ReasonNoMatchingPods
		c.Message = "no pod governed by this preference runs on a node with an agent"
	case len(t.problems) > 0 || t.pending > 0 || t.behind > 0 || t.unreported > 0:
		c.Status, c.Reason = metav1.ConditionFalse, numav1.ReasonPartiallyApplied
		c.Message = fmt.Sprintf("%d containers placed; %s", sum.Containers, describeCounts(t.problems, t.pending, t.behind, t.unreported))
	default:
		c.Status, c.Reason = metav1.ConditionTrue, numav1.ReasonApplied
		c.Message = fmt.Sprintf("%d containers (%d tasks) on %d nodes prefer %s",
			sum.Containers, sum.Tasks, sum.Nodes, describeTarget(pref))
	}
	return c
}

// effective says whether the kernel acts on the placed containers' preference: it ignores
// it on a node whose kernel.numa_balancing is disabled.
func effective(t *tally, gen int64) metav1.Condition {
	c := metav1.Condition{Type: numav1.ConditionEffective, ObservedGeneration: gen}
	var ineffective int64
	for _, n := range t.noEffect {
		ineffective += n
	}
	switch {
	case t.containers == 0:
		c.Status, c.Reason = metav1.ConditionUnknown, numav1.ReasonNoPlacedContainers
		c.Message = "no container is placed yet"
	case ineffective > 0:
		c.Status, c.Reason = metav1.ConditionFalse, topReason(t.noEffect)
		c.Message = fmt.Sprintf("%d of %d placed containers run where kernel.numa_balancing is disabled, so the kernel ignores their preferred node (nodes %s)",
			ineffective, t.containers, someNodes(t.ineffectiveNodes))
	default:
		c.Status, c.Reason = metav1.ConditionTrue, numav1.ReasonNumaBalancingEnabled
		c.Message = fmt.Sprintf("NUMA balancing is enabled where the %d placed containers run", t.containers)
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

// problemNodes keeps the MaxProblemNodes nodes with the most problems, most first, ties by
// name; nodes whose entry was refused (InvalidReport, count 1) come before all, so that
// problems counted by thousands elsewhere cannot hide them.
func problemNodes(nodes []numav1.NodeProblem) []numav1.NodeProblem {
	refused := func(p numav1.NodeProblem) bool { return p.Reason == numav1.ReasonInvalidReport }
	slices.SortFunc(nodes, func(a, b numav1.NodeProblem) int {
		return cmp.Or(compareBool(refused(b), refused(a)), cmp.Compare(b.Count, a.Count), cmp.Compare(a.NodeName, b.NodeName))
	})
	if len(nodes) > numav1.MaxProblemNodes {
		nodes = nodes[:numav1.MaxProblemNodes]
	}
	if len(nodes) == 0 {
		return nil
	}
	return nodes
}

// compareBool orders false before true.
func compareBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}

func describeTarget(pref *numav1.NumaPreference) string {
	if pref.Spec.Node != nil && (pref.Spec.Mode == "" || pref.Spec.Mode == numav1.PlacementModeStatic) {
		return fmt.Sprintf("NUMA node %d", *pref.Spec.Node)
	}
	return fmt.Sprintf("the NUMA node %s chose on each host", pref.Spec.Mode)
}

// topReason is the reason with the highest count, ties broken by name.
func topReason(m map[string]int64) string {
	keys := slices.SortedFunc(maps.Keys(m), func(a, b string) int {
		return cmp.Or(cmp.Compare(m[b], m[a]), cmp.Compare(a, b))
	})
	return keys[0]
}

func describeCounts(m map[string]int64, pending int64, behind, unreported int32) string {
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

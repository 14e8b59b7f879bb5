// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package summarizer

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
	"github.com/numapref/numapref/internal/testutil/builders"
	"github.com/numapref/numapref/internal/testutil/ctrltest"
)

// report makes node's report with one entry for ns/p at generation 3.
func report(node string, e numav1.PreferenceReport, balancing string) numav1.NumaNodeReport {
	e.Namespace, e.Name, e.Generation = "ns", "p", 3
	return numav1.NumaNodeReport{ObjectMeta: metav1.ObjectMeta{Name: node},
		Status: numav1.NumaNodeReportStatus{NumaBalancing: balancing, Preferences: []numav1.PreferenceReport{e}}}
}

func TestSummarize(t *testing.T) {
	type cond struct{ Type, Status, Reason string }
	counts := func(kv ...any) []numav1.ReasonCount {
		var out []numav1.ReasonCount
		for i := 0; i < len(kv); i += 2 {
			out = append(out, numav1.ReasonCount{Reason: kv[i].(string), Count: int32(kv[i+1].(int))})
		}
		return out
	}
	tests := map[string]struct {
		reports      []numav1.NumaNodeReport
		wantSummary  numav1.Summary
		wantProblems []numav1.NodeProblem
		want         []cond
	}{
		"no node reports anything": {
			want: []cond{
				{numav1.ConditionReady, "False", numav1.ReasonNoMatchingPods},
				{numav1.ConditionDegraded, "False", numav1.ReasonNoProblems},
				{numav1.ConditionConflict, "False", numav1.ReasonNoConflict},
				{numav1.ConditionEffective, "Unknown", numav1.ReasonNoPlacedContainers},
			},
		},
		"all applied on two nodes": {
			reports: []numav1.NumaNodeReport{
				report("a", numav1.PreferenceReport{Pods: 1, Containers: 2, Tasks: 10, MemoryPolicy: 1}, "normal"),
				report("b", numav1.PreferenceReport{Pods: 2, Containers: 2, Tasks: 5, MemoryPolicy: 2}, "normal"),
			},
			wantSummary: numav1.Summary{Nodes: 2, Pods: 3, Containers: 4, Tasks: 15, MemoryPolicy: 3},
			want: []cond{
				{numav1.ConditionReady, "True", numav1.ReasonApplied},
				{numav1.ConditionDegraded, "False", numav1.ReasonNoProblems},
				{numav1.ConditionConflict, "False", numav1.ReasonNoConflict},
				{numav1.ConditionEffective, "True", numav1.ReasonNumaBalancingEnabled},
			},
		},
		"problems, conflicts and a container still starting": {
			reports: []numav1.NumaNodeReport{
				report("a", numav1.PreferenceReport{Pods: 2, Containers: 1, Tasks: 4, Skipped: counts(
					numav1.ReasonMemoryPinnedElsewhere, 1, numav1.ReasonOverriddenByAnnotation, 3, numav1.ReasonContainerNotRunning, 1)}, "normal"),
				report("b", numav1.PreferenceReport{Pods: 1, Skipped: counts(numav1.ReasonNodeNotPresent, 2),
					Failed: counts(numav1.ReasonPermissionDenied, 1)}, "normal"),
			},
			wantSummary: numav1.Summary{Nodes: 2, Pods: 3, Containers: 1, Tasks: 4},
			wantProblems: []numav1.NodeProblem{{NodeName: "b", Reason: numav1.ReasonNodeNotPresent, Count: 3},
				{NodeName: "a", Reason: numav1.ReasonMemoryPinnedElsewhere, Count: 1}},
			want: []cond{
				{numav1.ConditionReady, "False", numav1.ReasonPartiallyApplied},
				{numav1.ConditionDegraded, "True", numav1.ReasonNodeNotPresent},
				{numav1.ConditionConflict, "True", numav1.ReasonOverriddenByAnnotation},
				{numav1.ConditionEffective, "True", numav1.ReasonNumaBalancingEnabled},
			},
		},
		"only still starting: not ready, not degraded": {
			reports:     []numav1.NumaNodeReport{report("a", numav1.PreferenceReport{Pods: 1, Skipped: counts(numav1.ReasonContainerNotRunning, 1)}, "normal")},
			wantSummary: numav1.Summary{Nodes: 1, Pods: 1},
			want: []cond{
				{numav1.ConditionReady, "False", numav1.ReasonPartiallyApplied},
				{numav1.ConditionDegraded, "False", numav1.ReasonNoProblems},
				{numav1.ConditionConflict, "False", numav1.ReasonNoConflict},
				{numav1.ConditionEffective, "Unknown", numav1.ReasonNoPlacedContainers},
			},
		},
		"placed where NUMA balancing is off: ready, not effective": {
			reports: []numav1.NumaNodeReport{
				report("a", numav1.PreferenceReport{Pods: 1, Containers: 1, Tasks: 3, Ineffective: counts(numav1.ReasonNumaBalancingDisabled, 1)}, "disabled"),
				report("b", numav1.PreferenceReport{Pods: 1, Containers: 1, Tasks: 3}, "normal"),
			},
			wantSummary:  numav1.Summary{Nodes: 2, Pods: 2, Containers: 2, Tasks: 6},
			wantProblems: []numav1.NodeProblem{{NodeName: "a", Reason: numav1.ReasonNumaBalancingDisabled, Count: 1}},
			want: []cond{
				{numav1.ConditionReady, "True", numav1.ReasonApplied},
				{numav1.ConditionDegraded, "False", numav1.ReasonNoProblems},
				{numav1.ConditionConflict, "False", numav1.ReasonNoConflict},
				{numav1.ConditionEffective, "False", numav1.ReasonNumaBalancingDisabled},
			},
		},
		"a node without the node restriction": {
			reports: []numav1.NumaNodeReport{
				unrestricted(report("a", numav1.PreferenceReport{Pods: 1, Containers: 1, Tasks: 3}, "normal")),
				report("b", numav1.PreferenceReport{Pods: 1, Containers: 1, Tasks: 3}, "normal"),
			},
			wantSummary: numav1.Summary{Nodes: 2, Pods: 2, Containers: 2, Tasks: 6},
			want: []cond{
				{numav1.ConditionReady, "True", numav1.ReasonApplied},
				{numav1.ConditionDegraded, "False", numav1.ReasonNoProblems},
				{numav1.ConditionConflict, "False", numav1.ReasonNoConflict},
				{numav1.ConditionEffective, "True", numav1.ReasonNumaBalancingEnabled},
				{numav1.ConditionNodeRestricted, "False", numav1.ReasonNodeRestrictionMissing},
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			p := builders.MakePreference("ns", "p").Generation(3).Node(1).Obj()
			st, _ := summarize(p, tc.reports)
			if diff := cmp.Diff(tc.wantSummary, st.Summary); diff != "" {
				t.Errorf("summary (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantProblems, st.ProblemNodes); diff != "" {
				t.Errorf("problem nodes (-want +got):\n%s", diff)
			}
			var got []cond
			for _, c := range st.Conditions {
				got = append(got, cond{c.Type, string(c.Status), c.Reason})
				if c.ObservedGeneration != 3 {
					t.Errorf("condition %s has observedGeneration %d, want 3", c.Type, c.ObservedGeneration)
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("conditions (-want +got):\n%s", diff)
			}
			if st.ObservedGeneration != 3 {
				t.Errorf("observedGeneration = %d, want 3", st.ObservedGeneration)
			}
		})
	}
}

func TestSummarizeWaitsForNodesOnAnOlderSpec(t *testing.T) {
	p := builders.MakePreference("ns", "p").Generation(4).Node(1).Obj()
	st, _ := summarize(p, []numav1.NumaNodeReport{report("a", numav1.PreferenceReport{Pods: 1, Containers: 1, Tasks: 2}, "normal")})
	ready := st.Conditions[0]
	if ready.Status != metav1.ConditionFalse || ready.Message != "1 containers placed; 1 nodes have not acted on the latest spec yet" {
		t.Errorf("Ready = %s %q; want False until node a reports generation 4", ready.Status, ready.Message)
	}
}

func TestSummarizeBoundsProblemNodes(t *testing.T) {
	p := builders.MakePreference("ns", "p").Generation(3).Node(1).Obj()
	var reports []numav1.NumaNodeReport
	for i := range 5000 {
		reports = append(reports, report(fmt.Sprintf("node-%04d", i), numav1.PreferenceReport{Pods: 1,
			Skipped: []numav1.ReasonCount{{Reason: numav1.ReasonKernelUnsupported, Count: int32(1 + i%7)}}}, "normal"))
	}
	st, _ := summarize(p, reports)
	if len(st.ProblemNodes) != numav1.MaxProblemNodes {
		t.Fatalf("%d problem nodes, want %d", len(st.ProblemNodes), numav1.MaxProblemNodes)
	}
	// Count 7 belongs to i%7 == 6: node-0006, node-0013, ... in name order.
	if first := st.ProblemNodes[0]; first.NodeName != "node-0006" || first.Count != 7 {
		t.Errorf("first problem node = %+v, want node-0006 with 7", first)
	}
	if st.Summary.Nodes != 5000 || st.Summary.Pods != 5000 {
		t.Errorf("summary = %+v, want 5000 nodes and pods", st.Summary)
	}
}

func TestSummarizeKeepsTransitionTimeWhenStatusHolds(t *testing.T) {
	p := builders.MakePreference("", "").Node(0).Obj()
	first, _ := summarize(p, nil)
	p.Status = first
	second, _ := summarize(p, nil)
	if diff := cmp.Diff(first, second); diff != "" {
		t.Errorf("a second summary of the same state differs (-first +second):\n%s", diff)
	}
}

// unrestricted gives rep the condition of an agent that found the node restriction missing.
func unrestricted(rep numav1.NumaNodeReport) numav1.NumaNodeReport {
	rep.Status.Conditions = []metav1.Condition{{Type: numav1.ConditionNodeRestricted, Status: metav1.ConditionFalse,
		Reason: numav1.ReasonNodeRestrictionMissing, Message: "accepted"}}
	return rep
}

// NodeRestricted names the nodes that found the restriction missing, and goes once none does.
func TestSummarizeNodeRestricted(t *testing.T) {
	p := builders.MakePreference("ns", "p").Generation(3).Node(1).Obj()
	entry := numav1.PreferenceReport{Pods: 1, Containers: 1, Tasks: 3}
	reports := []numav1.NumaNodeReport{unrestricted(report("b", entry, "normal")), report("c", entry, "normal")}
	for _, n := range []string{"e", "a", "d", "f"} {
		reports = append(reports, unrestricted(report(n, entry, "normal")))
	}
	p.Status, _ = summarize(p, reports)
	c := ctrltest.Condition(p, numav1.ConditionNodeRestricted)
	if c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, "nodes a, b, d and 2 more:") {
		t.Errorf("NodeRestricted = %s %q, want False naming a, b, d and 2 more", c.Status, c.Message)
	}
	enforced := report("a", entry, "normal")
	enforced.Status.Conditions = []metav1.Condition{{Type: numav1.ConditionNodeRestricted, Status: metav1.ConditionTrue, Reason: numav1.ReasonNodeRestrictionEnforced}}
	p.Status, _ = summarize(p, []numav1.NumaNodeReport{enforced, report("c", entry, "normal")})
	if c := ctrltest.Condition(p, numav1.ConditionNodeRestricted); c.Type != "" {
		t.Errorf("NodeRestricted = %+v once every node holds, want none", c)
	}
}

// A full report (omittedPreferences) that has no entry for the preference may have left it
// out: the summary says that node's state is unknown rather than count it as a node where
// the preference selects nothing, unless the entries kept prove it was not left out (the
// agent keeps each namespace's entries in turn, in name order): one named after it in its
// namespace, or its namespace stopped short of the last rounds.
func TestSummarizeReadsFullReports(t *testing.T) {
	p := builders.MakePreference("ns", "p").Generation(3).Node(1).Obj()
	full := func(node string, omitted int32, keys ...string) numav1.NumaNodeReport {
		rep := numav1.NumaNodeReport{ObjectMeta: metav1.ObjectMeta{Name: node},
			Status: numav1.NumaNodeReportStatus{NumaBalancing: "normal", OmittedPreferences: omitted}}
		for _, k := range keys {
			ns, name, _ := strings.Cut(k, "/")
			rep.Status.Preferences = append(rep.Status.Preferences, numav1.PreferenceReport{Namespace: ns, Name: name, Pods: 1, Generation: 3})
		}
		return rep
	}
	placed := report("c", numav1.PreferenceReport{Pods: 1, Containers: 1, Tasks: 2}, "normal")
	unknown := "1 containers placed; 1 nodes' reports are full and may leave this preference out (omittedPreferences)"
	for name, tc := range map[string]struct {
		reports     []numav1.NumaNodeReport
		wantReason  string
		wantMessage string
	}{
		"full, and it sorts after its namespace's last kept entry: unknown": {
			reports:    []numav1.NumaNodeReport{full("a", 2, "ns/a", "ns/o", "x/a", "x/b"), placed},
			wantReason: numav1.ReasonPartiallyApplied, wantMessage: unknown},
		"full, but an entry named after it was kept: not left out": {
			reports:    []numav1.NumaNodeReport{full("b", 2, "ns/a", "ns/z"), placed},
			wantReason: numav1.ReasonApplied},
		"full of another namespace's entries, its own stopped short: not left out": {
			reports:    []numav1.NumaNodeReport{full("b", 9, "ns/a", "x/a", "x/b", "x/c"), placed},
			wantReason: numav1.ReasonApplied},
		"full of another namespace's entries, its own absent: not left out": {
			reports:    []numav1.NumaNodeReport{full("b", 9, "x/a", "x/b", "y/a"), placed},
			wantReason: numav1.ReasonApplied},
		"one entry per namespace, its own absent: unknown": {
			reports:    []numav1.NumaNodeReport{full("b", 9, "x/a", "y/a"), placed},
			wantReason: numav1.ReasonPartiallyApplied, wantMessage: unknown},
		"not full: the preference selects nothing there": {
			reports:    []numav1.NumaNodeReport{full("a", 0, "ns/a", "ns/o"), placed},
			wantReason: numav1.ReasonApplied},
		"only a full report: unknown, not NoMatchingPods": {
			reports:    []numav1.NumaNodeReport{full("a", 1, "ns/a")},
			wantReason: numav1.ReasonPartiallyApplied, wantMessage: "0 containers placed; 1 nodes' reports are full and may leave this preference out (omittedPreferences)"},
	} {
		t.Run(name, func(t *testing.T) {
			st, _ := summarize(p, tc.reports)
			ready := st.Conditions[0]
			if ready.Reason != tc.wantReason || tc.wantMessage != "" && ready.Message != tc.wantMessage {
				t.Errorf("Ready: %s %q; want %s %q", ready.Reason, ready.Message, tc.wantReason, tc.wantMessage)
			}
		})
	}
}

// The summarizer finds the full reports of a preference without an entry for it (the
// index's fullReports key), and a change of what a full report may have left out enqueues
// the preferences it concerns.
func TestFullReportsAreFoundAndEnqueued(t *testing.T) {
	rep := numav1.NumaNodeReport{ObjectMeta: metav1.ObjectMeta{Name: "a"},
		Status: numav1.NumaNodeReportStatus{OmittedPreferences: 1, Preferences: []numav1.PreferenceReport{{Namespace: "ns", Name: "m"}}}}
	if diff := cmp.Diff([]string{"ns/m", fullReports}, reportPreferenceKeys(&rep)); diff != "" {
		t.Errorf("index keys of a full report (-want +got):\n%s", diff)
	}
	r := NewSummaryReconciler(ctrltest.FakeAPI(t, builders.MakePreference("ns", "a").Obj(), builders.MakePreference("ns", "z").Obj()), SummaryOptions{})
	notFull := rep.DeepCopy()
	notFull.Status.OmittedPreferences = 0
	want := map[types.NamespacedName]bool{{Namespace: "ns", Name: "z"}: true} // ns/a sorts before the kept ns/m
	if diff := cmp.Diff(want, r.omissionsChanged(context.Background(), notFull, &rep)); diff != "" {
		t.Errorf("preferences enqueued when the report fills up (-want +got):\n%s", diff)
	}
	if got := r.omissionsChanged(context.Background(), notFull, notFull); len(got) != 0 {
		t.Errorf("reports that left nothing out enqueued %v", got)
	}
}

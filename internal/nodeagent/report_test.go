// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package nodeagent

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/types"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
	"github.com/numapref/numapref/internal/nodeagent/desire"
	"github.com/numapref/numapref/internal/nodeagent/plan"
)

func TestPreferenceReports(t *testing.T) {
	pod := types.NamespacedName{Namespace: "ns", Name: "p"}
	d := func(uid, container, preference string, node int) desire.Desire {
		return desire.Desire{Pod: pod, PodUID: types.UID(uid), Container: container, Preference: preference, Node: node}
	}
	applied, pinned, stale := d("u1", "app", "a", 0), d("u1", "side", "a", 0), d("u2", "app", "a", 0)
	other, atStart := d("u4", "app", "a", 1), d("u5", "app", "a", 1)
	// Placed at their start, but not counted: refused since, of an older desire, of no preference.
	refusedAtStart, staleAtStart, annotatedAtStart := d("u6", "app", "a", 1), d("u7", "app", "a", 1), d("u8", "app", "", 1)
	byAnnotation := d("u3", "app", "", 1)
	plans := []desire.PodPlan{
		{Namespace: "ns", Desires: []desire.Desire{applied, pinned}, Selected: []string{"a", "b"},
			Conflicts: []desire.Conflict{{Preference: "b", Container: "app", Reason: numav1.ReasonOverriddenByPreference, Winner: "a"},
				{Preference: "b", Container: "side", Reason: numav1.ReasonOverriddenByPreference, Winner: "a"}}},
		{Namespace: "ns", Desires: []desire.Desire{stale}, Selected: []string{"a"}},
		{Namespace: "ns", Desires: []desire.Desire{other}, Selected: []string{"a"}},
		{Namespace: "ns", Desires: []desire.Desire{atStart, refusedAtStart, staleAtStart}, Selected: []string{"a"}},
		{Namespace: "ns", Desires: []desire.Desire{byAnnotation, annotatedAtStart}},
	}
	staleDesire := stale
	staleDesire.Node = 1
	results := map[desire.ContainerKey]plan.Result{
		applied.Key():      {Desire: applied, Node: 0, Reason: numav1.ReasonApplied, Tasks: 7, Failed: map[string]int{numav1.ReasonPermissionDenied: 1}},
		pinned.Key():       {Desire: pinned, Reason: numav1.ReasonMemoryPinnedElsewhere},
		stale.Key():        {Desire: staleDesire, Reason: numav1.ReasonApplied, Tasks: 100}, // from an older desire: not counted
		other.Key():        {Desire: other, Node: 1, Reason: numav1.ReasonApplied, Tasks: 2, PlacedAt: PlacedAtAfterStart},
		byAnnotation.Key(): {Desire: byAnnotation, Reason: numav1.ReasonApplied, Tasks: 3},
		atStart.Key():      {Desire: atStart, Node: 1, Reason: numav1.ReasonApplied, Tasks: 1, PlacedAt: PlacedAtStart},
		refusedAtStart.Key(): {Desire: refusedAtStart, Reason: numav1.ReasonKernelError, Tasks: 1,
			Failed: map[string]int{numav1.ReasonKernelError: 1}, PlacedAt: PlacedAtStart},
		staleAtStart.Key():     {Desire: staleDesire, Reason: numav1.ReasonApplied, Tasks: 1, PlacedAt: PlacedAtStart},
		annotatedAtStart.Key(): {Desire: annotatedAtStart, Reason: numav1.ReasonApplied, Tasks: 1, PlacedAt: PlacedAtStart},
	}
	a := numav1.PreferenceReport{Namespace: "ns", Name: "a", Pods: 6, Containers: 3, Tasks: 11, PlacedAtStart: 1,
		PodsByNode: []numav1.NodeCount{{Node: 0, Pods: 1}, {Node: 1, Pods: 2}},
		Skipped:    []numav1.ReasonCount{{Reason: numav1.ReasonKernelError, Count: 1}, {Reason: numav1.ReasonMemoryPinnedElsewhere, Count: 1}},
		Failed:     []numav1.ReasonCount{{Reason: numav1.ReasonKernelError, Count: 1}, {Reason: numav1.ReasonPermissionDenied, Count: 1}}}
	b := numav1.PreferenceReport{Namespace: "ns", Name: "b", Skipped: []numav1.ReasonCount{{Reason: numav1.ReasonOverriddenByPreference, Count: 2}}}
	if diff := cmp.Diff([]numav1.PreferenceReport{a, b}, PreferenceReports(plans, results, true)); diff != "" {
		t.Errorf("PreferenceReports with NUMA balancing (-want +got):\n%s", diff)
	}
	// Without NUMA balancing the kernel ignores the preference: the placed containers say so.
	a.Ineffective = []numav1.ReasonCount{{Reason: numav1.ReasonNumaBalancingDisabled, Count: 3}}
	if diff := cmp.Diff([]numav1.PreferenceReport{a, b}, PreferenceReports(plans, results, false)); diff != "" {
		t.Errorf("PreferenceReports without NUMA balancing (-want +got):\n%s", diff)
	}
}

// Past the bound a report keeps what fits, taking each namespace's entries in turn, so a
// namespace with a thousand preferences cannot crowd out another's; the rest are counted.
func TestBoundReports(t *testing.T) {
	entries := func(ns string, names ...string) []numav1.PreferenceReport {
		var out []numav1.PreferenceReport
		for _, n := range names {
			out = append(out, numav1.PreferenceReport{Namespace: ns, Name: n})
		}
		return out
	}
	join := func(lists ...[]numav1.PreferenceReport) []numav1.PreferenceReport {
		var out []numav1.PreferenceReport
		for _, l := range lists {
			out = append(out, l...)
		}
		return out
	}
	for name, tc := range map[string]struct {
		in, want    []numav1.PreferenceReport
		limit       int
		wantOmitted int
	}{
		"within the bound": {in: entries("a", "1", "2"), limit: 2, want: entries("a", "1", "2")},
		"one namespace": {in: entries("a", "1", "2", "3", "4"), limit: 2,
			want: entries("a", "1", "2"), wantOmitted: 2},
		"a namespace with many does not crowd out the others": {
			in:    join(entries("a", "1", "2", "3", "4", "5", "6"), entries("b", "1"), entries("c", "1", "2", "3")),
			limit: 5, want: join(entries("a", "1", "2"), entries("b", "1"), entries("c", "1", "2")), wantOmitted: 5},
	} {
		t.Run(name, func(t *testing.T) {
			got, omitted := BoundReports(tc.in, tc.limit)
			if diff := cmp.Diff(tc.want, got); diff != "" || omitted != tc.wantOmitted {
				t.Errorf("BoundReports: omitted %d, want %d; kept (-want +got):\n%s", omitted, tc.wantOmitted, diff)
			}
		})
	}
}

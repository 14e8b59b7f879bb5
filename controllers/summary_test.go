package controllers

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
)

func TestSummarize(t *testing.T) {
	type cond struct{ Type, Status, Reason string }
	tests := map[string]struct {
		nodes       []numav1.NodeStatus
		wantSummary numav1.Summary
		want        []cond
	}{
		"no node reports anything": {
			want: []cond{
				{numav1.ConditionReady, "False", numav1.ReasonNoMatchingPods},
				{numav1.ConditionDegraded, "False", numav1.ReasonNoProblems},
				{numav1.ConditionConflict, "False", numav1.ReasonNoConflict},
			},
		},
		"all applied on two nodes": {
			nodes:       []numav1.NodeStatus{{NodeName: "a", Pods: 1, Containers: 2, Tasks: 10}, {NodeName: "b", Pods: 2, Containers: 2, Tasks: 5}},
			wantSummary: numav1.Summary{Nodes: 2, Pods: 3, Containers: 4, Tasks: 15},
			want: []cond{
				{numav1.ConditionReady, "True", numav1.ReasonApplied},
				{numav1.ConditionDegraded, "False", numav1.ReasonNoProblems},
				{numav1.ConditionConflict, "False", numav1.ReasonNoConflict},
			},
		},
		"problems, conflicts and a container still starting": {
			nodes: []numav1.NodeStatus{
				{NodeName: "a", Pods: 2, Containers: 1, Tasks: 4, Skipped: []numav1.ReasonCount{
					{Reason: numav1.ReasonMemoryPinnedElsewhere, Count: 1}, {Reason: numav1.ReasonOverriddenByAnnotation, Count: 3},
					{Reason: numav1.ReasonContainerNotRunning, Count: 1}}},
				{NodeName: "b", Pods: 1, Skipped: []numav1.ReasonCount{{Reason: numav1.ReasonNodeNotPresent, Count: 2}},
					Failed: []numav1.ReasonCount{{Reason: numav1.ReasonPermissionDenied, Count: 1}}},
			},
			wantSummary: numav1.Summary{Nodes: 2, Pods: 3, Containers: 1, Tasks: 4},
			want: []cond{
				{numav1.ConditionReady, "False", numav1.ReasonPartiallyApplied},
				{numav1.ConditionDegraded, "True", numav1.ReasonNodeNotPresent},
				{numav1.ConditionConflict, "True", numav1.ReasonOverriddenByAnnotation},
			},
		},
		"only still starting: not ready, not degraded": {
			nodes:       []numav1.NodeStatus{{NodeName: "a", Pods: 1, Skipped: []numav1.ReasonCount{{Reason: numav1.ReasonContainerNotRunning, Count: 1}}}},
			wantSummary: numav1.Summary{Nodes: 1, Pods: 1},
			want: []cond{
				{numav1.ConditionReady, "False", numav1.ReasonPartiallyApplied},
				{numav1.ConditionDegraded, "False", numav1.ReasonNoProblems},
				{numav1.ConditionConflict, "False", numav1.ReasonNoConflict},
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			p := &numav1.NumaPreference{ObjectMeta: metav1.ObjectMeta{Generation: 3},
				Spec: numav1.NumaPreferenceSpec{Node: ptr.To[int32](1)}, Status: numav1.NumaPreferenceStatus{Nodes: tc.nodes}}
			st := summarize(p)
			if diff := cmp.Diff(tc.wantSummary, st.Summary); diff != "" {
				t.Errorf("summary (-want +got):\n%s", diff)
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

func TestSummarizeKeepsTransitionTimeWhenStatusHolds(t *testing.T) {
	p := &numav1.NumaPreference{Spec: numav1.NumaPreferenceSpec{Node: ptr.To[int32](0)}}
	first := summarize(p)
	p.Status = first
	second := summarize(p)
	if diff := cmp.Diff(first, second); diff != "" {
		t.Errorf("a second summary of the same state differs (-first +second):\n%s", diff)
	}
}

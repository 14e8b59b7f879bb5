package nodeagent

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/types"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
)

func TestNodeEntries(t *testing.T) {
	pod := types.NamespacedName{Namespace: "ns", Name: "p"}
	d := func(uid, container, preference string, node int) Desire {
		return Desire{Pod: pod, PodUID: types.UID(uid), Container: container, Preference: preference, Node: node}
	}
	applied, pinned, stale := d("u1", "app", "a", 0), d("u1", "side", "a", 0), d("u2", "app", "a", 0)
	byAnnotation := d("u3", "app", "", 1)
	plans := []PodPlan{
		{Namespace: "ns", Desires: []Desire{applied, pinned}, Selected: []string{"a", "b"},
			Conflicts: []Conflict{{Preference: "b", Container: "app", Reason: numav1.ReasonOverriddenByPreference, Winner: "a"},
				{Preference: "b", Container: "side", Reason: numav1.ReasonOverriddenByPreference, Winner: "a"}}},
		{Namespace: "ns", Desires: []Desire{stale}, Selected: []string{"a"}},
		{Namespace: "ns", Desires: []Desire{byAnnotation}},
	}
	staleDesire := stale
	staleDesire.Node = 1
	results := map[ContainerKey]ContainerResult{
		applied.Key():      {Desire: applied, Reason: numav1.ReasonApplied, Tasks: 7, Failed: map[string]int{numav1.ReasonPermissionDenied: 1}},
		pinned.Key():       {Desire: pinned, Reason: numav1.ReasonMemoryPinnedElsewhere},
		stale.Key():        {Desire: staleDesire, Reason: numav1.ReasonApplied, Tasks: 100}, // from an older desire: not counted
		byAnnotation.Key(): {Desire: byAnnotation, Reason: numav1.ReasonApplied, Tasks: 3},
	}
	want := map[string]numav1.NodeStatus{
		"ns/a": {NodeName: "n1", Pods: 2, Containers: 1, Tasks: 7,
			Skipped: []numav1.ReasonCount{{Reason: numav1.ReasonMemoryPinnedElsewhere, Count: 1}},
			Failed:  []numav1.ReasonCount{{Reason: numav1.ReasonPermissionDenied, Count: 1}}},
		"ns/b": {NodeName: "n1", Skipped: []numav1.ReasonCount{{Reason: numav1.ReasonOverriddenByPreference, Count: 2}}},
	}
	if diff := cmp.Diff(want, NodeEntries("n1", plans, results)); diff != "" {
		t.Errorf("NodeEntries (-want +got):\n%s", diff)
	}
}

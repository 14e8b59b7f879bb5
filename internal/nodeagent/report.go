package nodeagent

import (
	"maps"
	"slices"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
)

// NodeEntries computes, for every NumaPreference that selects a pod on this node, the
// status entry this node's agent reports. Results that belong to an older desire (the
// engine has not run since it changed) are left out until the engine catches up. The
// keys are NumaPreference names within the pods' namespaces: "namespace/name".
func NodeEntries(nodeName string, plans []PodPlan, results map[ContainerKey]ContainerResult) map[string]numav1.NodeStatus {
	type acc struct {
		pods              map[string]bool
		containers, tasks int32
		skipped, failed   map[string]int32
	}
	accs := map[string]*acc{}
	get := func(key string) *acc {
		a := accs[key]
		if a == nil {
			a = &acc{pods: map[string]bool{}, skipped: map[string]int32{}, failed: map[string]int32{}}
			accs[key] = a
		}
		return a
	}
	for _, plan := range plans {
		for _, name := range plan.Selected {
			get(plan.Namespace + "/" + name)
		}
		for _, d := range plan.Desires {
			if d.Preference == "" {
				continue
			}
			a := get(d.Pod.Namespace + "/" + d.Preference)
			a.pods[string(d.PodUID)] = true
			r, ok := results[d.Key()]
			if !ok || r.Desire != d {
				continue // not applied yet
			}
			if r.Reason == numav1.ReasonApplied {
				a.containers++
			} else {
				a.skipped[r.Reason]++
			}
			a.tasks += int32(r.Tasks)
			for reason, n := range r.Failed {
				a.failed[reason] += int32(n)
			}
		}
		for _, c := range plan.Conflicts {
			get(plan.Namespace + "/" + c.Preference).skipped[c.Reason]++
		}
	}
	out := make(map[string]numav1.NodeStatus, len(accs))
	for key, a := range accs {
		out[key] = numav1.NodeStatus{
			NodeName:   nodeName,
			Pods:       int32(len(a.pods)),
			Containers: a.containers,
			Tasks:      a.tasks,
			Skipped:    reasonCounts(a.skipped),
			Failed:     reasonCounts(a.failed),
		}
	}
	return out
}

// reasonCounts turns a map into the API's list, sorted by reason so equal states compare equal.
func reasonCounts(m map[string]int32) []numav1.ReasonCount {
	var out []numav1.ReasonCount
	for _, reason := range slices.Sorted(maps.Keys(m)) {
		if m[reason] > 0 {
			out = append(out, numav1.ReasonCount{Reason: reason, Count: m[reason]})
		}
	}
	return out
}

// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package nodeagent

import (
	"cmp"
	"maps"
	"slices"
	"strings"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
	"github.com/numapref/numapref/internal/nodeagent/desire"
	"github.com/numapref/numapref/internal/nodeagent/plan"
)

// PreferenceReports computes, for every NumaPreference that selects a pod on this node,
// the entry this node's report carries, sorted by namespace and name. Results that belong
// to an older desire (the engine has not run since it changed) are left out until the
// engine catches up. balancing is false when the kernel ignores the preference
// (kernel.numa_balancing disabled): every placed container then counts as ineffective.
func PreferenceReports(plans []desire.PodPlan, results map[desire.ContainerKey]plan.Result, balancing bool) []numav1.PreferenceReport {
	accs := map[reportKey]*reportAcc{}
	get := func(k reportKey) *reportAcc {
		a := accs[k]
		if a == nil {
			a = &reportAcc{pods: map[string]bool{}, podNode: map[string]int{},
				skipped: map[string]int32{}, failed: map[string]int32{}, noEffects: map[string]int32{}}
			accs[k] = a
		}
		return a
	}
	for _, pp := range plans {
		for _, name := range pp.Selected {
			get(reportKey{pp.Namespace, name})
		}
		for _, d := range pp.Desires {
			if d.Preference != "" {
				get(reportKey{d.Pod.Namespace, d.Preference}).add(d, results, balancing)
			}
		}
		for _, c := range pp.Conflicts {
			get(reportKey{pp.Namespace, c.Preference}).skipped[c.Reason]++
		}
	}
	out := make([]numav1.PreferenceReport, 0, len(accs))
	for k, a := range accs {
		out = append(out, a.report(k))
	}
	slices.SortFunc(out, func(a, b numav1.PreferenceReport) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	return out
}

// reportKey names a NumaPreference.
type reportKey struct{ namespace, name string }

// reportAcc accumulates one NumaPreference's report entry.
type reportAcc struct {
	pods                       map[string]bool
	podNode                    map[string]int
	containers, tasks          int32
	placedAtStart              int32 // of containers: placed by a start pass
	memoryPolicy               int32 // of containers: holding their home's memory policy
	migrated                   int32 // of containers: whose pages were moved home
	pagesMigrated, pagesStayed int64
	skipped, failed, noEffects map[string]int32
}

// add counts desire d's container, if the engine's result is for this very desire.
func (a *reportAcc) add(d desire.Desire, results map[desire.ContainerKey]plan.Result, balancing bool) {
	a.pods[string(d.PodUID)] = true
	r, ok := results[d.Key()]
	if !ok || r.Desire != d {
		return // not applied yet
	}
	if r.Reason == numav1.ReasonApplied {
		a.containers++
		a.podNode[string(d.PodUID)] = r.Node
		if r.PlacedAt == PlacedAtStart {
			a.placedAtStart++
		}
		if strings.Contains(r.Mechanism, plan.MechanismMemoryPolicy) {
			a.memoryPolicy++
		}
		if strings.Contains(r.Mechanism, plan.MechanismMigrate) {
			a.migrated++
		}
		if !balancing && !actsWithoutBalancing(r.Mechanism) {
			a.noEffects[numav1.ReasonNumaBalancingDisabled]++
		}
	} else {
		a.skipped[r.Reason]++
	}
	a.tasks += int32(r.Tasks)
	a.pagesMigrated += r.Migration.Moved
	a.pagesStayed += r.Migration.NotMoved
	for reason, n := range r.Failed {
		a.failed[reason] += int32(n)
	}
}

// report is the entry of NumaPreference k.
func (a *reportAcc) report(k reportKey) numav1.PreferenceReport {
	byNode := map[int]int32{}
	for _, n := range a.podNode {
		byNode[n]++
	}
	var podsByNode []numav1.NodeCount
	for _, n := range slices.Sorted(maps.Keys(byNode)) {
		podsByNode = append(podsByNode, numav1.NodeCount{Node: int32(n), Pods: byNode[n]})
	}
	return numav1.PreferenceReport{
		Namespace: k.namespace, Name: k.name,
		Pods: int32(len(a.pods)), Containers: a.containers, Tasks: a.tasks,
		PodsByNode:    podsByNode,
		Skipped:       reasonCounts(a.skipped),
		Failed:        reasonCounts(a.failed),
		Ineffective:   reasonCounts(a.noEffects),
		PlacedAtStart: a.placedAtStart,
		MemoryPolicy:  a.memoryPolicy,
		Migrated:      a.migrated, PagesMigrated: a.pagesMigrated, PagesNotMigrated: a.pagesStayed,
	}
}

// actsWithoutBalancing says whether a container's mechanisms give it its home with
// kernel.numa_balancing disabled: a memory policy steers its allocations and moved pages
// stay moved; the prctl alone acts only through balancing.
func actsWithoutBalancing(mechanism string) bool {
	return strings.Contains(mechanism, plan.MechanismMemoryPolicy) || strings.Contains(mechanism, plan.MechanismMigrate)
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

// BoundReports keeps at most limit of entries, which are sorted by namespace and name, and
// says how many it left out. It takes each namespace's entries in turn, one at a time and
// in name order, so no namespace's preferences crowd out another's: each namespace keeps a
// prefix of its own, in the order they came (a preference missing from a kept namespace
// and named before its last kept entry selects nothing on the node).
func BoundReports(entries []numav1.PreferenceReport, limit int) ([]numav1.PreferenceReport, int) {
	if len(entries) <= limit {
		return entries, 0
	}
	var namespaces [][]numav1.PreferenceReport
	for i, e := range entries {
		if i == 0 || e.Namespace != entries[i-1].Namespace {
			namespaces = append(namespaces, nil)
		}
		last := len(namespaces) - 1
		namespaces[last] = append(namespaces[last], e)
	}
	taken := make([]int, len(namespaces))
	for n := 0; n < limit; {
		for i := range namespaces {
			if n < limit && taken[i] < len(namespaces[i]) {
				taken[i]++
				n++
			}
		}
	}
	kept := make([]numav1.PreferenceReport, 0, limit)
	for i, ns := range namespaces {
		kept = append(kept, ns[:taken[i]]...)
	}
	return kept, len(entries) - limit
}

// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package plan

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/types"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
	"github.com/numapref/numapref/internal/cpuset"
	"github.com/numapref/numapref/internal/nodeagent/cgroups"
	"github.com/numapref/numapref/internal/nodeagent/desire"
	"github.com/numapref/numapref/internal/numa"
)

// topo is a fixture topology: online nodes and the CPUs of each.
type topo struct {
	online []int
	cpus   map[int][]int
}

var (
	oneNode    = topo{online: []int{0}, cpus: map[int][]int{0: {0, 1}}}
	twoNodes   = topo{online: []int{0, 1}, cpus: map[int][]int{0: {0, 1}, 1: {2, 3}}}
	fourNodes  = topo{online: []int{0, 1, 2, 3}, cpus: map[int][]int{0: {0, 1}, 1: {2, 3}, 2: {4, 5}, 3: {6, 7}}}
	sparseTopo = topo{online: []int{0, 2}, cpus: map[int][]int{0: {0, 1}, 2: {2, 3}}}
)

// cpusetHost is a cgroup resolver whose containers (by container ID) have the given
// cpusets; every container resolves.
type cpusetHost map[string]cpuset.Cpuset

func (h cpusetHost) Resolve(ref cgroups.ContainerRef) (*cgroups.Container, error) {
	return &cgroups.Container{Ref: ref, Path: "/" + ref.ContainerID}, nil
}
func (h cpusetHost) ListTIDs(*cgroups.Container) ([]cgroups.TaskRef, error) { return nil, nil }
func (h cpusetHost) ThreadIDs(*cgroups.Container) ([]int, error)            { return nil, nil }
func (h cpusetHost) Cpuset(c *cgroups.Container) (cpuset.Cpuset, error) {
	return h[c.Ref.ContainerID], nil
}

// chooser resolves the automatic modes pass after pass on a fixture topology, keeping
// the sticky choices from one to the next as the engine does.
type chooser struct {
	in       Input
	resolved Resolutions
}

func newChooser(t *testing.T, tp topo, host cpusetHost, memFree map[int]uint64) *chooser {
	t.Helper()
	cpuNode := map[int]int{}
	for n, cpus := range tp.cpus {
		for _, c := range cpus {
			cpuNode[c] = n
		}
	}
	return &chooser{in: Input{
		Cgroups: host, Support: numa.Support{Supported: true, Backend: "fake"}, ProcRoot: "/nonexistent",
		Topology: NewTopology(tp.online, cpuNode), Choices: Choices{},
		MemFree: func(n int) (uint64, error) { return memFree[n], nil },
	}}
}

// restarted is a chooser with c's choices as an agent restarted on the same choices file
// reads them.
func (c *chooser) restarted(t *testing.T, tp topo, host cpusetHost, memFree map[int]uint64) *chooser {
	t.Helper()
	var list []Choice
	for _, ch := range c.in.Choices {
		list = append(list, ch)
	}
	data, err := json.Marshal(list)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &list); err != nil {
		t.Fatal(err)
	}
	again := newChooser(t, tp, host, memFree)
	for _, ch := range list {
		again.in.Choices[ch.ChoiceKey] = ch
	}
	return again
}

// spreadPod is pod name's one container in a Spread group, weighing w millicores.
func spreadPod(name string, w int64, allowed string) desire.Desire {
	return desire.Desire{Pod: types.NamespacedName{Namespace: "ns", Name: name}, PodUID: types.UID("uid-" + name), Container: "main",
		Node: numa.NoNode, Ref: cgroups.ContainerRef{PodUID: "uid-" + name, ContainerID: name},
		Placement: desire.Placement{Mode: numav1.PlacementModeSpread, Group: "NumaPreference ns/db", Weight: w, Allowed: allowed}}
}

func desireMap(ds ...desire.Desire) map[desire.ContainerKey]desire.Desire {
	m := map[desire.ContainerKey]desire.Desire{}
	for _, d := range ds {
		m[d.Key()] = d
	}
	return m
}

// nodesOf resolves and returns each pod's node, or its skip reason.
func (c *chooser) nodesOf(ds map[desire.ContainerKey]desire.Desire) map[string]string {
	c.in.Desired = ds
	pl := Full(c.in)
	c.in.Choices, c.resolved = pl.Choices, pl.Resolutions
	out := map[string]string{}
	for k, d := range ds {
		r := c.resolved.of(k)
		if r.skip != "" {
			out[d.Pod.Name] = r.skip
		} else {
			out[d.Pod.Name] = fmt.Sprint(r.node)
		}
	}
	return out
}

func TestSpread(t *testing.T) {
	tests := map[string]struct {
		topo  topo
		pods  []desire.Desire
		mems  map[string][]int
		want  map[string]string
		whyOf string // a pod whose why is checked
		why   string
	}{
		"one node": {topo: oneNode,
			pods: []desire.Desire{spreadPod("a", 1000, ""), spreadPod("b", 1000, "")},
			want: map[string]string{"a": "0", "b": "0"}},
		"two nodes, equal weights: 2 and 2, ties to the lowest id": {topo: twoNodes,
			pods:  []desire.Desire{spreadPod("a", 1000, ""), spreadPod("b", 1000, ""), spreadPod("c", 1000, ""), spreadPod("d", 1000, "")},
			want:  map[string]string{"a": "0", "b": "1", "c": "0", "d": "1"},
			whyOf: "c", why: "Spread: 2 of 4 pods on node 0"},
		"weights: the lightest node takes the next pod": {topo: twoNodes,
			pods: []desire.Desire{spreadPod("a", 4000, ""), spreadPod("b", 1000, ""), spreadPod("c", 1000, ""), spreadPod("d", 1000, "")},
			want: map[string]string{"a": "0", "b": "1", "c": "1", "d": "1"}},
		"four nodes": {topo: fourNodes,
			pods: []desire.Desire{spreadPod("a", 1, ""), spreadPod("b", 1, ""), spreadPod("c", 1, ""), spreadPod("d", 1, ""), spreadPod("e", 1, ""), spreadPod("f", 1, "")},
			want: map[string]string{"a": "0", "b": "1", "c": "2", "d": "3", "e": "0", "f": "1"}},
		"sparse ids {0,2}": {topo: sparseTopo,
			pods: []desire.Desire{spreadPod("a", 1, ""), spreadPod("b", 1, ""), spreadPod("c", 1, "")},
			want: map[string]string{"a": "0", "b": "2", "c": "0"}},
		"spec.nodes restricts": {topo: fourNodes,
			pods: []desire.Desire{spreadPod("a", 1, "1-2"), spreadPod("b", 1, "1-2"), spreadPod("c", 1, "1-2")},
			want: map[string]string{"a": "1", "b": "2", "c": "1"}},
		"no allowed node online": {topo: twoNodes,
			pods: []desire.Desire{spreadPod("a", 1, "5")},
			want: map[string]string{"a": numav1.ReasonNodeNotPresent}},
		"a pod pinned by cpuset.mems gets its node, and counts in the load": {topo: twoNodes,
			pods:  []desire.Desire{spreadPod("a", 1000, ""), spreadPod("b", 1000, ""), spreadPod("c", 1000, "")},
			mems:  map[string][]int{"a": {1}},
			want:  map[string]string{"a": "1", "b": "0", "c": "0"},
			whyOf: "a", why: "Spread: the only node the pod may use here"},
		"pinned to a node spec.nodes does not allow": {topo: twoNodes,
			pods: []desire.Desire{spreadPod("a", 1, "0")},
			mems: map[string][]int{"a": {1}},
			want: map[string]string{"a": numav1.ReasonMemoryPinnedElsewhere}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			host := cpusetHost{}
			for pod, mems := range tc.mems {
				host[pod] = cpuset.Cpuset{Mems: mems}
			}
			c := newChooser(t, tc.topo, host, nil)
			ds := desireMap(tc.pods...)
			if diff := cmp.Diff(tc.want, c.nodesOf(ds)); diff != "" {
				t.Errorf("nodes (-want +got):\n%s", diff)
			}
			if tc.whyOf != "" {
				if got := c.resolved.of(desire.ContainerKey{PodUID: types.UID("uid-" + tc.whyOf), Container: "main"}).why; got != tc.why {
					t.Errorf("why of %s = %q, want %q", tc.whyOf, got, tc.why)
				}
			}
		})
	}
}

// Running pods are never reshuffled: churn and restarts keep every pod's node.
func TestSpreadIsSticky(t *testing.T) {
	e := newChooser(t, twoNodes, cpusetHost{}, nil)
	a, b, c, d := spreadPod("a", 1000, ""), spreadPod("b", 1000, ""), spreadPod("c", 1000, ""), spreadPod("d", 1000, "")
	if diff := cmp.Diff(map[string]string{"a": "0", "b": "1", "c": "0", "d": "1"}, e.nodesOf(desireMap(a, b, c, d))); diff != "" {
		t.Fatalf("four pods (-want +got):\n%s", diff)
	}
	// A fifth goes to the lighter node (a tie: the lowest id).
	f := spreadPod("e", 1000, "")
	if got := e.nodesOf(desireMap(a, b, c, d, f)); got["e"] != "0" {
		t.Fatalf("fifth pod on %s, want 0", got["e"])
	}
	// Deleting one pod moves nobody; its share is free for the next pod.
	got := e.nodesOf(desireMap(b, c, d, f))
	if diff := cmp.Diff(map[string]string{"b": "1", "c": "0", "d": "1", "e": "0"}, got); diff != "" {
		t.Fatalf("after a pod left (-want +got):\n%s", diff)
	}
	// A restarted agent (the same choices, through their file's form) keeps every running
	// pod's node, even with the pods listed in another order, and places a new one by the
	// loads.
	e2 := e.restarted(t, twoNodes, cpusetHost{}, nil)
	g := spreadPod("a2", 1000, "")
	got = e2.nodesOf(desireMap(f, d, c, b, g))
	if diff := cmp.Diff(map[string]string{"b": "1", "c": "0", "d": "1", "e": "0", "a2": "0"}, got); diff != "" {
		t.Fatalf("after a restart (-want +got):\n%s", diff)
	}
}

func TestMostFreeMemory(t *testing.T) {
	mfm := func(name, allowed string) desire.Desire {
		d := spreadPod(name, 1000, allowed)
		d.Placement.Mode, d.Placement.Group = numav1.PlacementModeMostFreeMemory, "NumaPreference ns/mfm"
		return d
	}
	free := map[int]uint64{0: 1 << 30, 1: 3 << 30, 2: 2 << 30, 3: 3 << 30}
	e := newChooser(t, fourNodes, cpusetHost{}, free)
	a := mfm("a", "")
	got := e.nodesOf(desireMap(a))
	if got["a"] != "1" { // 1 and 3 tie at 3 GiB: the lowest id
		t.Fatalf("pod a on %s, want 1 (most free, ties to the lowest id)", got["a"])
	}
	if why := e.resolved.of(a.Key()).why; why != "MostFreeMemory: 3072 MiB free on node 1, the most of 0-3" {
		t.Errorf("why = %q", why)
	}
	// Sticky: node 1 filling up moves nobody already placed; a new pod goes elsewhere.
	free[1] = 0
	b := mfm("b", "")
	got = e.nodesOf(desireMap(a, b))
	if got["a"] != "1" || got["b"] != "3" {
		t.Fatalf("after node 1 filled: a on %s, b on %s; want a kept on 1, b on 3", got["a"], got["b"])
	}
	// spec.nodes restricts the choice; a restart keeps it.
	c := mfm("c", "0,2")
	got = e.nodesOf(desireMap(a, b, c))
	if got["c"] != "2" {
		t.Fatalf("pod c allowed {0,2} on %s, want 2", got["c"])
	}
	free[2] = 0
	e2 := e.restarted(t, fourNodes, cpusetHost{}, free)
	if diff := cmp.Diff(map[string]string{"a": "1", "b": "3", "c": "2"}, e2.nodesOf(desireMap(a, b, c))); diff != "" {
		t.Errorf("after a restart (-want +got):\n%s", diff)
	}
}

func TestFollowCPUs(t *testing.T) {
	follow := func(allowed string) desire.Desire {
		d := spreadPod("p", 0, allowed)
		d.Placement.Mode, d.Placement.Group = numav1.PlacementModeFollowCPUs, "NumaPreference ns/cpus"
		return d
	}
	tests := map[string]struct {
		topo    topo
		cpuset  cpuset.Cpuset
		allowed string
		want    string
	}{
		"one CPU on node 1":                  {topo: twoNodes, cpuset: cpuset.Cpuset{CPUs: []int{2}}, want: "1"},
		"spans every node":                   {topo: twoNodes, cpuset: cpuset.Cpuset{CPUs: []int{1, 2}}, want: numav1.ReasonCPUsNotPinned},
		"no cpuset controller: every CPU":    {topo: twoNodes, cpuset: cpuset.Cpuset{ControllerMissing: true}, want: numav1.ReasonCPUsNotPinned},
		"most of the CPUs on node 0":         {topo: fourNodes, cpuset: cpuset.Cpuset{CPUs: []int{0, 1, 2}}, want: "0"},
		"a tie goes to the lowest id":        {topo: fourNodes, cpuset: cpuset.Cpuset{CPUs: []int{4, 7}}, want: "2"},
		"sparse ids":                         {topo: sparseTopo, cpuset: cpuset.Cpuset{CPUs: []int{3}}, want: "2"},
		"one node: the only node":            {topo: oneNode, cpuset: cpuset.Cpuset{CPUs: []int{0, 1}}, want: "0"},
		"spec.nodes picks among the CPUs'":   {topo: fourNodes, cpuset: cpuset.Cpuset{CPUs: []int{0, 1, 2}}, allowed: "1", want: "1"},
		"CPUs on no allowed node":            {topo: fourNodes, cpuset: cpuset.Cpuset{CPUs: []int{0, 1}}, allowed: "3", want: numav1.ReasonCPUsPinnedElsewhere},
		"cpuset.mems narrows to its node":    {topo: fourNodes, cpuset: cpuset.Cpuset{CPUs: []int{0, 1, 2}, Mems: []int{1}}, want: "1"},
		"allowed set with no node online":    {topo: twoNodes, cpuset: cpuset.Cpuset{CPUs: []int{0}}, allowed: "7", want: numav1.ReasonNodeNotPresent},
		"mems elsewhere than the CPUs' node": {topo: twoNodes, cpuset: cpuset.Cpuset{CPUs: []int{0}, Mems: []int{1}}, want: numav1.ReasonCPUsPinnedElsewhere},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			e := newChooser(t, tc.topo, cpusetHost{"p": tc.cpuset}, nil)
			if got := e.nodesOf(desireMap(follow(tc.allowed)))["p"]; got != tc.want {
				t.Errorf("node = %s, want %s (why %q, message %q)", got, tc.want, e.resolved.of(follow("").Key()).why, e.resolved.of(follow("").Key()).message)
			}
		})
	}
	// The choice follows the cpuset: CPU manager moves the container to node 1.
	host := cpusetHost{"p": {CPUs: []int{0}}}
	e := newChooser(t, twoNodes, host, nil)
	if got := e.nodesOf(desireMap(follow(""))); got["p"] != "0" {
		t.Fatalf("first on %s, want 0", got["p"])
	}
	host["p"] = cpuset.Cpuset{CPUs: []int{3}}
	if got := e.nodesOf(desireMap(follow(""))); got["p"] != "1" {
		t.Fatalf("after the cpuset moved to CPU 3: %s, want 1", got["p"])
	}
	if why := e.resolved.of(follow("").Key()).why; why != "FollowCPUs: 1 of 1 CPUs of cpuset.cpus 3 are on node 1" {
		t.Errorf("why = %q", why)
	}
}

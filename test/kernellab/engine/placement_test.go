// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build linux && kernellab

package engine

import (
	"context"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
	"github.com/numapref/numapref/internal/nodeagent"
	"github.com/numapref/numapref/internal/nodeagent/desire"
	"github.com/numapref/numapref/internal/numa"
	"github.com/numapref/numapref/internal/numa/prctl"
	"github.com/numapref/numapref/test/kernellab/labenv"
)

// The automatic placement modes on the real two-node kernel and the real prctl: each check
// reads both the GET and the numa_preferred_nid_force line of /proc/<tid>/sched.
func TestPlacementRealPrctl(t *testing.T) {
	labenv.RequireKernel(t, "patched")
	p, sup := prctl.New(prPreferredNID, "/proc")
	if !sup.Supported {
		t.Fatalf("the patched kernel does not prove PR_PREFERRED_NID: %+v", sup)
	}
	topo, err := numa.DiscoverTopology("/sys")
	if err != nil {
		t.Fatal(err)
	}
	l := newLab(t)
	auto := func(d desire.Desire, mode numav1.PlacementMode, group string) desire.Desire {
		d.Node, d.Placement = numa.NoNode, desire.Placement{Mode: mode, Group: group, Weight: 1000}
		return d
	}

	// Spread: two workloads of one group end on different nodes.
	w1, d1 := l.container(t, "spread-1", "", 0, 2)
	w2, d2 := l.container(t, "spread-2", "", 0, 2)
	d1, d2 = auto(d1, numav1.PlacementModeSpread, "lab spread"), auto(d2, numav1.PlacementModeSpread, "lab spread")

	// FollowCPUs: a container whose cpuset.cpus is CPU 1 (node 1).
	c3, w3, d3 := l.containerWith(t, "follow", "", 0, 2)
	if err := c3.SetCPUs("1"); err != nil {
		t.Fatal(err)
	}
	d3 = auto(d3, numav1.PlacementModeFollowCPUs, "lab follow")

	// MostFreeMemory: a hog pinned to node 0 leaves node 1 the freer one.
	wHog, _ := l.container(t, "hog", "0", 0, 0)
	free := func(n int) uint64 {
		v, err := numa.ReadNodeMemFree("/sys", n)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	if err := wHog.Alloc(int(free(0)>>20) / 3); err != nil {
		t.Fatal(err)
	}
	if f0, f1 := free(0), free(1); f0 >= f1 {
		t.Fatalf("after the hog: MemFree node 0 %d MiB, node 1 %d MiB: node 1 is not the freer", f0>>20, f1>>20)
	} else {
		t.Logf("MemFree: node 0 %d MiB, node 1 %d MiB", f0>>20, f1>>20)
	}
	w4, d4 := l.container(t, "mostfree", "", 0, 2)
	d4 = auto(d4, numav1.PlacementModeMostFreeMemory, "lab mostfree")

	e, err := nodeagent.NewEngine(nodeagent.EngineConfig{
		Resolver: l.resolver, Kernel: p, Support: sup, OnlineNodes: l.online, CPUNode: topo.CPUNode,
		MemFree:    func(n int) (uint64, error) { return numa.ReadNodeMemFree("/sys", n) },
		LedgerPath: t.TempDir() + "/ledger.json", ChoicesPath: t.TempDir() + "/choices.json",
		RescanInterval: time.Hour, Log: testr.New(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() { _ = e.Start(ctx); close(stopped) }()
	defer func() { cancel(); <-stopped }()
	e.SetDesired([]desire.Desire{d1, d2, d3, d4})
	waitFor(t, "the four containers are Applied", func() bool {
		for _, d := range []desire.Desire{d1, d2, d3, d4} {
			if e.Results()[d.Key()].Reason != numav1.ReasonApplied {
				return false
			}
		}
		return true
	})
	res := e.Results()
	for name, c := range map[string]struct {
		d    desire.Desire
		pid  int
		want int // -1: any
	}{"spread-1": {d1, w1.Pid(), -1}, "spread-2": {d2, w2.Pid(), -1}, "follow": {d3, w3.Pid(), 1}, "mostfree": {d4, w4.Pid(), 1}} {
		r := res[c.d.Key()]
		if c.want >= 0 && r.Node != c.want {
			t.Errorf("%s chose node %d (%s), want %d", name, r.Node, r.Why, c.want)
		}
		if s := states(t, p, c.pid); !all(s, r.Node) {
			t.Errorf("%s: tasks %v, want every GET and force line at node %d", name, s, r.Node)
		}
		t.Logf("%s: node %d (%s)", name, r.Node, r.Why)
	}
	if n1, n2 := res[d1.Key()].Node, res[d2.Key()].Node; n1 == n2 {
		t.Errorf("the two Spread workloads share node %d, want one on each", n1)
	}
	e.SetDesired(nil)
	e.Pass()
}

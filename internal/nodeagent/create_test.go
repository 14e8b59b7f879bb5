// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package nodeagent

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
	"github.com/numapref/numapref/internal/cpuset"
	"github.com/numapref/numapref/internal/nodeagent/cgroups"
	"github.com/numapref/numapref/internal/nodeagent/desire"
	"github.com/numapref/numapref/internal/nodeagent/plan"
	"github.com/numapref/numapref/internal/numa"
	"github.com/numapref/numapref/internal/numa/mempolicy"
)

// The engine gives a container it creates the memory policy of its home only once synced
// and only when its desire wants one; it remembers what it asked for by container ID; a
// Spread pod's choice made at creation is kept, so the next pod created is spread to the
// other node and the first keeps its node at its start.
func TestPolicyAtCreation(t *testing.T) {
	h := newFakeHost(t)
	e := h.engine(EngineConfig{Policies: mempolicy.Support{Preferred: true, PreferredMany: true}})
	d := fakeDesire(1)
	d.MemoryPolicy = numav1.MemoryPolicyAtCreation
	if _, _, ok := e.PolicyAtCreation(d, cpuset.Cpuset{}); ok {
		t.Fatal("a policy before the engine is synced")
	}
	e.SetDesired(nil)
	r, p, ok := e.PolicyAtCreation(d, cpuset.Cpuset{})
	if !ok || !p.Equal(mempolicy.Preferred(1)) || r.Mechanism != plan.MechanismMemoryPolicy {
		t.Fatalf("PolicyAtCreation = %+v, %s, %v; want prefer:1 by memoryPolicy", r, p, ok)
	}
	if asked, ok := e.asked.get("x"); !ok || !asked.Equal(p) {
		t.Errorf("asked for container x: %s, %v; want %s remembered by its bare ID", asked, ok, p)
	}
	if _, _, ok := e.PolicyAtCreation(d, cpuset.Cpuset{Mems: []int{0}}); ok {
		t.Error("a policy on node 1 for a container whose cpuset.mems is 0")
	}
	d.MemoryPolicy = numav1.MemoryPolicyAuto // the prctl is here: Auto leaves it alone
	if _, _, ok := e.PolicyAtCreation(d, cpuset.Cpuset{}); ok {
		t.Error("a policy for Auto on a node with the prctl")
	}

	spread := func(name string) desire.Desire {
		return desire.Desire{Pod: types.NamespacedName{Namespace: "ns", Name: name}, PodUID: types.UID("uid-" + name), Container: "main",
			Node: numa.NoNode, Ref: cgroups.ContainerRef{PodUID: "uid-" + name, ContainerID: "containerd://" + name},
			MemoryPolicy: numav1.MemoryPolicyAtCreation,
			Placement:    desire.Placement{Mode: numav1.PlacementModeSpread, Group: "NumaPreference ns/db", Weight: 1000}}
	}
	a, b := spread("a"), spread("b")
	ra, _, okA := e.PolicyAtCreation(a, cpuset.Cpuset{})
	if !okA {
		t.Fatalf("Spread pod a at creation: %+v", ra)
	}
	// b is created before a starts: a's choice counts in the group's load all the same.
	rb, _, okB := e.PolicyAtCreation(b, cpuset.Cpuset{})
	if !okB || rb.Node == ra.Node {
		t.Errorf("Spread pod b at creation on node %d (%v), a on %d; want the other node", rb.Node, okB, ra.Node)
	}
	if r, ok := e.PlaceAtStart(a); !ok || r.Node != ra.Node {
		t.Errorf("Spread pod a at its start: node %d (%v), want its node at creation, %d", r.Node, ok, ra.Node)
	}
}

// A Static container's creation never waits for a pass: it needs only the topology.
func TestStaticPolicyAtCreationDoesNotWaitForAPass(t *testing.T) {
	h := newFakeHost(t)
	e := h.engine(EngineConfig{Policies: mempolicy.Support{Preferred: true}})
	e.SetDesired(nil)
	d := fakeDesire(1)
	d.MemoryPolicy = numav1.MemoryPolicyAtCreation
	e.passMu.Lock() // a long pass
	defer e.passMu.Unlock()
	done := make(chan bool, 1)
	go func() {
		_, p, ok := e.PolicyAtCreation(d, cpuset.Cpuset{})
		done <- ok && p.Equal(mempolicy.Preferred(1))
	}()
	select {
	case ok := <-done:
		if !ok {
			t.Error("no prefer:1 for a Static container created during a pass")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the creation of a Static container waited for the pass")
	}
	d.Node = 5 // not online on the fake host
	if r, _, ok := e.PolicyAtCreation(d, cpuset.Cpuset{}); ok || r.Reason != numav1.ReasonNodeNotPresent {
		t.Errorf("node 5 at creation: %s, %v; want %s and no policy", r.Reason, ok, numav1.ReasonNodeNotPresent)
	}
}

// A container's policy is read once per first process: the numa_maps read walks page
// tables, and nothing but the process itself can change its policy.
func TestReadPoliciesOncePerProcess(t *testing.T) {
	proc := t.TempDir()
	write := func(pid int, policy string) {
		t.Helper()
		dir := filepath.Join(proc, strconv.Itoa(pid))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		line := "55d4c0a00000 " + policy + " file=/app mapped=1 N0=1 kernelpagesize_kB=4\n"
		if err := os.WriteFile(filepath.Join(dir, "numa_maps"), []byte(line), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	c := newReadPolicies(proc)
	write(100, "prefer:1")
	if p, err := c.read("containerd://x", 100); err != nil || p.String() != "prefer:1" {
		t.Fatalf("first read: %s, %v", p, err)
	}
	write(100, "default") // as if read again: the cache answers
	if p, _ := c.read("x", 100); p.String() != "prefer:1" {
		t.Errorf("second read of the same process: %s, want the first answer, prefer:1", p)
	}
	write(200, "default")
	if p, _ := c.read("x", 200); p.String() != "default" {
		t.Errorf("another first process: %s, want it read anew, default", p)
	}
	if _, err := c.read("y", 300); err == nil {
		t.Error("a process without numa_maps read")
	}
}

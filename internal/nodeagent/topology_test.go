// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package nodeagent

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
	"github.com/numapref/numapref/internal/nodeagent/desire"
	"github.com/numapref/numapref/internal/numa"
)

// The engine reads the topology again at a full pass once topologyEvery passed, when the
// desired state changed, and while a container's node is not present: a NUMA node taken
// offline is no longer targeted (its containers report NodeNotPresent and are undone),
// one brought back is at the next pass, and a CPU taken offline no longer counts for
// FollowCPUs. In between, an idle rescan reads no sysfs. The fixture is a sysfs tree
// (internal/numa's two-node one) changed between passes.
func TestTopologyFollowsTheHost(t *testing.T) {
	sys := t.TempDir()
	if err := os.CopyFS(sys, os.DirFS("../numa/testdata/sysfs/two-nodes")); err != nil {
		t.Fatal(err)
	}
	nodeDir := filepath.Join(sys, "devices", "system", "node")
	write := func(name, content string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(nodeDir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	h := newFakeHost(t)
	h.addTask(100, -1)
	fc := clocktesting.NewFakeClock(time.Now())
	e := h.engine(EngineConfig{Clock: fc, Topology: func() (numa.Online, error) { return numa.ReadOnline(sys) }})
	static := fakeDesire(1)
	e.SetDesired([]desire.Desire{static})
	check := func(when, reason string, value int) {
		t.Helper()
		e.Pass()
		if r := e.Results()[static.Key()]; r.Reason != reason || h.value(100) != value {
			t.Errorf("%s: %s (%s), task holds %d; want %s, %d", when, r.Reason, r.Message, h.value(100), reason, value)
		}
	}
	check("both nodes online", numav1.ReasonApplied, 1)
	write("online", "0\n")
	check("node 1 offline, a rescan before topologyEvery", numav1.ReasonApplied, 1)
	fc.Step(topologyEvery)
	check("node 1 offline", numav1.ReasonNodeNotPresent, numa.NoNode)
	write("online", "0-1\n")
	check("node 1 back", numav1.ReasonApplied, 1) // at once: a node was not present

	// FollowCPUs: the container runs on CPUs 3 and 4 (nodes 0 and 1, the fixture's
	// 0-3 and 4-7), so it spans every node; with CPU 3 offline it follows node 1.
	follow := fakeDesire(numa.NoNode)
	follow.Placement = desire.Placement{Mode: numav1.PlacementModeFollowCPUs}
	h.setCPUs([]int{3, 4}, 0)
	e.SetDesired([]desire.Desire{follow})
	e.Pass()
	if r := e.Results()[follow.Key()]; r.Reason != numav1.ReasonCPUsNotPinned {
		t.Errorf("FollowCPUs over CPUs of both nodes: %s (%s), want CPUsNotPinned", r.Reason, r.Message)
	}
	write("node0/cpulist", "0-2\n")
	fc.Step(topologyEvery)
	e.Pass()
	if r := e.Results()[follow.Key()]; r.Reason != numav1.ReasonApplied || r.Node != 1 || h.value(100) != 1 {
		t.Errorf("CPU 3 offline: %s node %d (%s), task holds %d; want Applied on node 1", r.Reason, r.Node, r.Message, h.value(100))
	}

	// A topology that cannot be read keeps the last one read.
	write("online", "garbage\n")
	fc.Step(topologyEvery)
	e.Pass()
	if r := e.Results()[follow.Key()]; r.Reason != numav1.ReasonApplied || r.Node != 1 {
		t.Errorf("sysfs unreadable: %s node %d (%s), want the last topology kept", r.Reason, r.Node, r.Message)
	}
}

// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package nodeagent

import (
	"testing"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
	"github.com/numapref/numapref/internal/nodeagent/cgroups"
	"github.com/numapref/numapref/internal/nodeagent/desire"
	"github.com/numapref/numapref/internal/nodeagent/devices"
	"github.com/numapref/numapref/internal/nodeagent/plan"
)

// Publishing says whether the results changed (SkippedTasks, for metrics only, aside);
// readers get copies, and each result with its listing.
func TestPublished(t *testing.T) {
	p := newPublished()
	key := fakeDesire(1).Key()
	applied := plan.Result{Desire: fakeDesire(1), Reason: numav1.ReasonApplied, Node: 1, Tasks: 2}
	listing := map[desire.ContainerKey]plan.Listing{key: {Cgroup: &cgroups.Container{Path: "/fake"}}}
	if !p.publish(map[desire.ContainerKey]plan.Result{key: applied}, listing) {
		t.Error("the first results are no change")
	}
	skipped := applied
	skipped.SkippedTasks = 3
	if p.publish(map[desire.ContainerKey]plan.Result{key: skipped}, listing) {
		t.Error("a change of SkippedTasks alone is a change")
	}
	got := p.results()
	delete(got, key)
	if _, ok := p.result(key); !ok {
		t.Error("a reader's copy is the published results")
	}
	results, listings := p.view()
	if len(results) != 1 || listings[0].Cgroup == nil || listings[0].Cgroup.Path != "/fake" {
		t.Errorf("view = %v, %v; want the result with its listing", results, listings)
	}
	if p.anyNodeNotPresent() {
		t.Error("a node not present, with every result Applied")
	}
	absent := applied
	absent.Reason = numav1.ReasonNodeNotPresent
	if !p.publish(map[desire.ContainerKey]plan.Result{key: absent}, nil) || !p.anyNodeNotPresent() {
		t.Error("NodeNotPresent not seen")
	}
}

// A page move that starts moving the pages of a container the prctl already placed
// changes only its mechanism and its move, not its reason: that is a change, so the
// node's report counts the move. Its counts growing at each step, and its state going
// between Queued, Moving and Waiting, are not; its end is. (The kernel lab's scenario 7
// found a report that never counted a move on the patched kernel.)
func TestPublishedPageMoves(t *testing.T) {
	p := newPublished()
	key := fakeDesire(1).Key()
	placed := plan.Result{Desire: fakeDesire(1), Reason: numav1.ReasonApplied, Node: 1, Tasks: 2,
		Mechanism: plan.MechanismPrctl, Migrate: true, Migration: plan.Migration{Node: 1, State: plan.MigrationQueued}}
	publish := func(r plan.Result) bool {
		return p.publish(map[desire.ContainerKey]plan.Result{key: r}, nil)
	}
	publish(placed)
	moving := placed
	moving.Mechanism = plan.MechanismPrctl + "+" + plan.MechanismMigrate
	moving.Migration = plan.Migration{Node: 1, State: plan.MigrationMoving, Moved: 3364}
	if !publish(moving) {
		t.Error("the first pages moved (mechanism prctl+migrate) are no change")
	}
	further := moving
	further.Migration = plan.Migration{Node: 1, State: plan.MigrationWaiting, Moved: 68658, Error: "EBUSY"}
	if publish(further) {
		t.Error("more pages moved, and the move waiting, is a change")
	}
	ended := further
	ended.Migration = plan.Migration{Node: 1, State: plan.MigrationEnded, Ended: plan.MigrationMoved, Moved: 131000}
	if !publish(ended) {
		t.Error("the move's end is no change")
	}
	devs := ended
	devs.Devices = []devices.Device{{ResourceName: "example.com/gpu", ID: "gpu-0", Nodes: []int{1}}}
	if !publish(devs) {
		t.Error("a device found is no change")
	}
	moved := devs
	moved.Devices = []devices.Device{{ResourceName: "example.com/gpu", ID: "gpu-0", Nodes: []int{0}}}
	if !publish(moved) {
		t.Error("a device's node changed is no change")
	}
}

// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package nodeagent

import (
	"testing"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
	"github.com/numapref/numapref/internal/nodeagent/cgroups"
	"github.com/numapref/numapref/internal/nodeagent/desire"
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

// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build host && linux

package nodeagent

import (
	"testing"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
	"github.com/numapref/numapref/internal/nodeagent/desire"
	"github.com/numapref/numapref/internal/testutil/hostlab"
)

// On real cgroups and processes, with the emulated kernel: a container with far more
// threads than its share gets TooManyTasks, none of its tasks is set and the ledger has no
// entry of it, while another container on the node is placed.
func TestEngineTooManyTasksStarvesNoOtherContainer(t *testing.T) {
	const share = 16
	el := newEngineLab(t)
	big, _, bigD := el.container(t, "big", 0, 40)
	small, _, smallD := el.container(t, "small", 0, 0)
	if tids, err := hostlab.TasksOf(small.Pid()); err != nil || len(tids) > share/2 {
		t.Fatalf("the small workload has tasks %v (%v): the test needs it well within the share of %d", tids, err, share)
	}
	e := el.engineWith(t, EngineConfig{MaxTasksPerContainer: share})
	e.SetDesired([]desire.Desire{bigD, smallD})

	if got := el.settle(t, e, small.Pid()); !allEqual(got, 0) {
		t.Fatalf("the small container's tasks hold %v, want every one on node 0", got)
	}
	results := e.Results()
	if r := results[smallD.Key()]; r.Reason != numav1.ReasonApplied {
		t.Errorf("small: %s (%s), want Applied", r.Reason, r.Message)
	}
	r := results[bigD.Key()]
	if r.Reason != numav1.ReasonTooManyTasks || r.SkippedTasks <= 40 {
		t.Errorf("big: %s with %d skipped tasks (%s), want TooManyTasks with more than 40", r.Reason, r.SkippedTasks, r.Message)
	}
	if v := el.values(t, big.Pid()); !allEqual(v, -1) {
		t.Errorf("the big container's tasks hold %v, want every one untouched (-1)", v)
	}
	l, err := readLedger(el.ledger)
	if err != nil {
		t.Fatal(err)
	}
	if l[bigD.Key()] != nil || l[smallD.Key()] == nil {
		t.Errorf("ledger has big: %v, small: %v; want small's entry and none of big", l[bigD.Key()] != nil, l[smallD.Key()] != nil)
	}
}

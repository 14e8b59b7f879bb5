// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package known

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/numapref/numapref/internal/nodeagent/cgroups"
	"github.com/numapref/numapref/internal/nodeagent/desire"
)

func testContainers() Containers {
	return Containers{
		{PodUID: "b", Container: "main"}: {PodUID: "b", Container: "main", Tasks: map[int]*Task{7: {Start: 70, Prev: -1, Values: []int{0}}}},
		{PodUID: "a", Container: "side"}: {PodUID: "a", Container: "side", Ref: cgroups.ContainerRef{ContainerID: "containerd://s"},
			Tasks: map[int]*Task{1: {Start: 10, Prev: 2, Values: []int{1, 0}}}},
		{PodUID: "a", Container: "main"}: {PodUID: "a", Container: "main", Tasks: map[int]*Task{}},
	}
}

// A view answers from the containers and hands out copies: changing what it returns
// changes nothing in them.
func TestViewReadsWithoutChanging(t *testing.T) {
	c := testContainers()
	before := c.Clone()
	v := NewView(c)
	side := v.Entry(desire.ContainerKey{PodUID: "a", Container: "side"})
	if !side.Exists() || !side.Has(1) || side.Has(2) || side.Ref().ContainerID != "containerd://s" {
		t.Errorf("entry of a/side: exists %v, has 1 %v, has 2 %v, ref %v", side.Exists(), side.Has(1), side.Has(2), side.Ref())
	}
	task, _ := side.Task(1)
	task.Values[0] = 9
	whole, _ := side.Copy()
	whole.Tasks[1].Prev = 9
	v.Clone()[desire.ContainerKey{PodUID: "b", Container: "main"}].Tasks[7].Start = 9
	if diff := cmp.Diff(before, c); diff != "" {
		t.Errorf("the containers changed through their view (-before +after):\n%s", diff)
	}
	if none := v.Entry(desire.ContainerKey{PodUID: "z"}); none.Exists() || none.Has(1) || len(slices.Collect(none.TIDs())) != 0 {
		t.Error("an unknown container has an entry")
	}
	if v.Len() != 3 || len(slices.Collect(v.Keys())) != 3 {
		t.Errorf("%d containers, want 3", v.Len())
	}
}

// Sorted orders the containers by pod UID, then container, as the ledger's file lists them.
func TestSorted(t *testing.T) {
	var got []string
	for _, c := range testContainers().Sorted() {
		got = append(got, c.PodUID+"/"+c.Container)
	}
	if want := []string{"a/main", "a/side", "b/main"}; !slices.Equal(got, want) {
		t.Errorf("Sorted = %v, want %v", got, want)
	}
}

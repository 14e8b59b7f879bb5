// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package plan

import (
	"fmt"
	"testing"

	"k8s.io/apimachinery/pkg/types"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
	"github.com/numapref/numapref/internal/nodeagent/cgroups"
	"github.com/numapref/numapref/internal/nodeagent/desire"
	"github.com/numapref/numapref/internal/nodeagent/known"
)

// multiHost is fakeHost's tasks split among containers, by container ID; each task is its
// own process.
type multiHost struct {
	*fakeHost
	tids map[string][]int
}

func (h *multiHost) ListTIDs(c *cgroups.Container) ([]cgroups.TaskRef, error) {
	var out []cgroups.TaskRef
	for _, tid := range h.tids[c.Ref.ContainerID] {
		out = append(out, cgroups.TaskRef{TGID: tid, TID: tid})
	}
	return out, nil
}

// A full pass whose containers would take more task entries than the ledger holds refuses
// the largest containers of the namespace that holds most, until the rest fit; the other
// namespace is placed whole. Without the share every container's SETs would go ahead, and
// the ledger's write ahead, past its bound, would put every container into LedgerError.
func TestFullSharesTheLedgerByNamespace(t *testing.T) {
	containers := map[string]struct {
		ns    string
		tasks int
	}{"small-a": {"small", 5}, "big-a": {"big", 8}, "big-b": {"big", 9}}
	values := map[int]int{}
	h := &multiHost{tids: map[string][]int{}}
	desired := map[desire.ContainerKey]desire.Desire{}
	next := 100
	for id, c := range containers {
		for range c.tasks {
			values[next] = -1 // no node yet: each gets a SET and an entry
			h.tids[id] = append(h.tids[id], next)
			next++
		}
		key := desire.ContainerKey{PodUID: types.UID("pod-" + id), Container: "main"}
		desired[key] = desire.Desire{Pod: types.NamespacedName{Namespace: c.ns, Name: id}, PodUID: key.PodUID, Container: "main", Node: 1,
			Ref: cgroups.ContainerRef{PodUID: string(key.PodUID), ContainerID: id}}
	}
	h.fakeHost = newFakeHost(t, values)
	in := h.fakeHost.input(known.Containers{})
	in.Cgroups, in.Desired, in.LedgerTasks = h, desired, 15

	pl := Full(in)
	placed, refused := map[string]int{}, map[string]string{}
	for _, cp := range pl.Containers {
		id := cp.Result.Desire.Ref.ContainerID
		switch cp.Result.Reason {
		case numav1.ReasonApplied:
			placed[id] = len(cp.Sets)
		case numav1.ReasonTooManyTasks:
			refused[id] = cp.Result.Message
			if len(cp.Sets) > 0 || cp.Entry != nil || !cp.Undo {
				t.Errorf("%s refused with %d SETs, entry %v, undo %v; want none, none, undone", id, len(cp.Sets), cp.Entry, cp.Undo)
			}
		default:
			t.Errorf("%s: %s: %s", id, cp.Result.Reason, cp.Result.Message)
		}
	}
	if want := map[string]int{"small-a": 5, "big-a": 8}; fmt.Sprint(placed) != fmt.Sprint(want) {
		t.Errorf("placed (SETs by container) %v, want %v: big's largest refused, small whole", placed, want)
	}
	if _, ok := refused["big-b"]; !ok || len(refused) != 1 {
		t.Errorf("refused %v, want big-b alone", refused)
	}
	for _, key := range pl.TGIDs {
		if key.PodUID == "pod-big-b" {
			t.Error("the refused container's processes are still followed: a fork pass would place it")
		}
	}

	// With room for all, nothing is refused.
	in.LedgerTasks = 22
	for _, cp := range Full(in).Containers {
		if cp.Result.Reason != numav1.ReasonApplied {
			t.Errorf("room for 22 tasks: %s got %s", cp.Result.Desire.Ref.ContainerID, cp.Result.Reason)
		}
	}
}

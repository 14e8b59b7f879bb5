// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package cgroups

import (
	"errors"
	"fmt"
	"slices"

	"github.com/numapref/numapref/internal/numa"
)

// IdentifiedTask is a listed task pinned to its start time.
type IdentifiedTask struct {
	TGID int `json:"tgid"`
	numa.Task
}

// Identify reads the identity (start time, /proc/<tid>/stat field 22) of the given tasks
// of c, normally the ones new since the last listing, then lists c again and keeps only
// tasks still in it. Reading identities between two listings pins each identity to a task
// that was in the container: a task id that left the cgroup and was reused elsewhere
// before its identity was read is dropped, and one reused inside the container fails its
// numa.Task.Verify later. Tasks that exited are left out. Costs one /proc/<tid>/stat read
// per task, so pass only new tasks.
func (r *Resolver) Identify(c *Container, refs []TaskRef) ([]IdentifiedTask, error) {
	ids := make([]IdentifiedTask, 0, len(refs))
	for _, ref := range refs {
		task, err := numa.ReadTask(r.procRoot, ref.TID)
		if errors.Is(err, numa.ErrTaskGone) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("identifying tasks of %s: %w", c.Path, err)
		}
		ids = append(ids, IdentifiedTask{TGID: ref.TGID, Task: task})
	}
	if len(ids) == 0 {
		return ids, nil
	}
	now, err := r.ListTIDs(c)
	if err != nil {
		return nil, fmt.Errorf("identifying tasks of %s: %w", c.Path, err)
	}
	return slices.DeleteFunc(ids, func(t IdentifiedTask) bool {
		_, still := slices.BinarySearchFunc(now, t.TID, func(ref TaskRef, tid int) int { return ref.TID - tid })
		return !still
	}), nil
}

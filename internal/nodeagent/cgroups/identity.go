package cgroups

import (
	"errors"
	"fmt"
	"slices"

	"github.com/numapref/numapref/internal/numa"
)

// ErrTaskReplaced means a task id now names a different task than the one identified:
// the first exited and the kernel gave its id to a new task. It wraps numa.ErrTaskGone.
var ErrTaskReplaced = fmt.Errorf("task id reused by a new task: %w", numa.ErrTaskGone)

// IdentifiedTask is a listed task pinned to its start time.
type IdentifiedTask struct {
	TGID int `json:"tgid"`
	numa.Task
}

// Identify reads the identity (start time, /proc/<tid>/stat field 22) of the given tasks
// of c, normally the ones new since the last listing, then lists c again and keeps only
// tasks still in it. Reading identities between two listings pins each identity to a task
// that was in the container: a task id that left the cgroup and was reused elsewhere
// before its identity was read is dropped, and one reused inside the container shows a
// start time that differs from VerifyTask's later. Tasks that exited are left out. Costs
// one /proc/<tid>/stat read per task, so pass only new tasks.
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

// VerifyTask checks that t still runs: nil when its id names the same task (same start
// time), an error wrapping numa.ErrTaskGone when it exited, ErrTaskReplaced (which also
// wraps numa.ErrTaskGone) when its id now names another task. Start times have the
// kernel's clock-tick resolution (10 ms at USER_HZ 100); an id reused within the same tick
// cannot be told apart.
func (r *Resolver) VerifyTask(t numa.Task) error {
	now, err := numa.ReadTask(r.procRoot, t.TID)
	if err != nil {
		return fmt.Errorf("verifying task %d: %w", t.TID, err)
	}
	if now.StartTime != t.StartTime {
		return fmt.Errorf("verifying task %d: started at tick %d, identified at tick %d: %w",
			t.TID, now.StartTime, t.StartTime, ErrTaskReplaced)
	}
	return nil
}

// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package numa

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
)

// ErrTaskReplaced means a task id now names a different task than the one identified:
// the first exited and the kernel gave its id to a new task. It wraps ErrTaskGone.
var ErrTaskReplaced = fmt.Errorf("task id reused by a new task: %w", ErrTaskGone)

// ListThreads returns the thread ids of process tgid, the entries of
// procRoot/<tgid>/task, sorted. A process that does not exist (any more) yields an error
// wrapping ErrTaskGone. The list is a snapshot: threads come and go while it is read.
func ListThreads(procRoot string, tgid int) ([]int, error) {
	dir := filepath.Join(procRoot, strconv.Itoa(tgid), "task")
	f, err := os.Open(dir)
	if err != nil {
		return nil, threadsError(tgid, err)
	}
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		return nil, threadsError(tgid, err)
	}
	tids := make([]int, 0, len(names))
	for _, name := range names {
		if tid, err := strconv.Atoi(name); err == nil && tid > 0 {
			tids = append(tids, tid)
		}
	}
	slices.Sort(tids)
	return tids, nil
}

// threadsError describes err, the failure to list the threads of process tgid; a process
// that is gone (no directory, or one that went while it was read) wraps ErrTaskGone.
func threadsError(tgid int, err error) error {
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ESRCH) {
		err = ErrTaskGone
	}
	return fmt.Errorf("listing threads of process %d: %w", tgid, err)
}

// Verify checks that t still runs: that t.TID names, in procRoot, the task that started
// at t.StartTime. It returns nil while it does, an error wrapping ErrTaskGone once the
// task exited, and one wrapping ErrTaskReplaced (which wraps ErrTaskGone too) when its id
// names a newer task. Start times have the kernel's clock-tick resolution (10 ms at
// USER_HZ 100): an id reused within the same tick cannot be told apart.
func (t Task) Verify(procRoot string) error {
	now, err := ReadTask(procRoot, t.TID)
	if err != nil {
		return fmt.Errorf("verifying task %d: %w", t.TID, err)
	}
	if now != t {
		return fmt.Errorf("verifying task %d: started at tick %d, identified at tick %d: %w",
			t.TID, now.StartTime, t.StartTime, ErrTaskReplaced)
	}
	return nil
}

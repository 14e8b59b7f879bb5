// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build linux

package numa

import (
	"golang.org/x/sys/unix"

	"github.com/numapref/numapref/internal/fsutil"
)

// ReadTaskFileOwner is ReadTaskFile that also returns the uid that owns the file, from the
// file it read: a /proc/<tid> file belongs to the task's effective uid, or to root when the
// task is not dumpable (the kernel's task_dump_owner).
func ReadTaskFileOwner(procRoot string, tid int, name string) (data []byte, uid uint32, err error) {
	var st unix.Stat_t
	data, err = fsutil.ReadFileStat(taskFilePath(procRoot, tid, name), nil, &st)
	if err != nil {
		return nil, 0, taskFileError(tid, name, err)
	}
	return data, st.Uid, nil
}

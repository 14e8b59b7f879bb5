// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package numa

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/numapref/numapref/internal/fsutil"
)

// ErrTaskGone means a task exited (or never existed) between learning its id and reading it.
var ErrTaskGone = errors.New("task is gone")

// Task names one kernel task (thread) for as long as it lives. A tid alone is not enough:
// the kernel recycles pids, so the start time (clock ticks after boot, field 22 of
// /proc/<tid>/stat) is part of the identity.
type Task struct {
	TID       int    `json:"tid"`
	StartTime uint64 `json:"startTime"`
}

// TicksPerSecond is the unit of Task.StartTime: the kernel's USER_HZ, 100 on every
// architecture Linux runs on. Start times count on CLOCK_BOOTTIME (BoottimeNs).
const TicksPerSecond = 100

// ReadTask reads the identity of tid from procRoot (normally "/proc"). A task that does not
// exist yields an error wrapping ErrTaskGone.
func ReadTask(procRoot string, tid int) (Task, error) {
	data, err := ReadTaskFile(procRoot, tid, "stat")
	if err != nil {
		return Task{}, err
	}
	start, err := ParseStatStartTime(string(data))
	if err != nil {
		return Task{}, fmt.Errorf("task %d: %w", tid, err)
	}
	return Task{TID: tid, StartTime: start}, nil
}

// ReadTaskFile returns the contents of procRoot/<tid>/<name>. A task that does not exist
// yields an error wrapping ErrTaskGone.
func ReadTaskFile(procRoot string, tid int, name string) ([]byte, error) {
	data, err := fsutil.ReadFileInto(taskFilePath(procRoot, tid, name), nil)
	if err != nil {
		return nil, taskFileError(tid, name, err)
	}
	return data, nil
}

func taskFilePath(procRoot string, tid int, name string) string {
	return filepath.Join(procRoot, strconv.Itoa(tid), name)
}

// taskFileError describes err, the failure to read file name of task tid. When the file
// does not exist, or the task exited while it was read, the error wraps ErrTaskGone
// instead of err.
func taskFileError(tid int, name string, err error) error {
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, errESRCH) {
		err = ErrTaskGone
	}
	return fmt.Errorf("reading %s of task %d: %w", name, tid, err)
}

// ParseStatStartTime returns field 22 (starttime) of a /proc/<pid>/stat line. The command
// name (field 2) may contain spaces and parentheses, so fields are counted after the last ')'.
func ParseStatStartTime(stat string) (uint64, error) {
	end := strings.LastIndexByte(stat, ')')
	if end < 0 {
		return 0, errors.New("parsing stat: no command name")
	}
	// After ") " come fields 3.. ; starttime is field 22, the 20th of them.
	fields := strings.Fields(stat[end+1:])
	const startTimeIndex = 22 - 3
	if len(fields) <= startTimeIndex {
		return 0, fmt.Errorf("parsing stat: %d fields after the command name, want more than %d", len(fields), startTimeIndex)
	}
	v, err := strconv.ParseUint(fields[startTimeIndex], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("parsing stat starttime %q: %w", fields[startTimeIndex], err)
	}
	return v, nil
}

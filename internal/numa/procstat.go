package numa

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
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

// ReadTask reads the identity of tid from procRoot (normally "/proc"). A task that does not
// exist yields an error wrapping ErrTaskGone.
func ReadTask(procRoot string, tid int) (Task, error) {
	data, err := os.ReadFile(filepath.Join(procRoot, strconv.Itoa(tid), "stat"))
	if errors.Is(err, os.ErrNotExist) || errors.Is(err, errESRCH) {
		return Task{}, fmt.Errorf("reading stat of task %d: %w", tid, ErrTaskGone)
	}
	if err != nil {
		return Task{}, fmt.Errorf("reading stat of task %d: %w", tid, err)
	}
	start, err := ParseStatStartTime(string(data))
	if err != nil {
		return Task{}, fmt.Errorf("task %d: %w", tid, err)
	}
	return Task{TID: tid, StartTime: start}, nil
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

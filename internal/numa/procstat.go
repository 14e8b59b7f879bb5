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

// memLayout is the address-space layout a task's stat line shows: startcode, endcode,
// startstack (fields 26-28) and start_data .. env_end (fields 45-51). A fork() child has
// its parent's layout until it execs; exec with address space randomization gives a new one.
type memLayout [10]uint64

// parseStatLayout extracts the memLayout from a /proc/<pid>/stat line. ok is false when the
// kernel hid the values (no mm, or the reader may not ptrace the task).
func parseStatLayout(stat string) (layout memLayout, ok bool, err error) {
	end := strings.LastIndexByte(stat, ')')
	if end < 0 {
		return memLayout{}, false, errors.New("parsing stat: no command name")
	}
	fields := strings.Fields(stat[end+1:])
	// Field n of stat(5) is fields[n-3].
	indexes := [10]int{26, 27, 28, 45, 46, 47, 48, 49, 50, 51}
	if len(fields) <= indexes[9]-3 {
		return memLayout{}, false, fmt.Errorf("parsing stat: %d fields after the command name, want more than %d", len(fields), indexes[9]-3)
	}
	for i, n := range indexes {
		if layout[i], err = strconv.ParseUint(fields[n-3], 10, 64); err != nil {
			return memLayout{}, false, fmt.Errorf("parsing stat field %d %q: %w", n, fields[n-3], err)
		}
	}
	// startstack (field 28) is 0 when hidden; start_code and end_code are then 0 or 1.
	return layout, layout[2] != 0, nil
}

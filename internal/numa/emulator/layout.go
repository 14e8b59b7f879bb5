// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package emulator

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

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

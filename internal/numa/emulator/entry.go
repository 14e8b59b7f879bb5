// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package emulator

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/numapref/numapref/internal/numa"
)

// taskOrigin says how the emulator learned a task's value.
type taskOrigin string

const (
	// originSet: a SET on the task.
	originSet taskOrigin = "set"
	// originInherited: copied from the creating task when the task was born (a thread, or a
	// CLONE_VM child), or kept across an exec.
	originInherited taskOrigin = "inherited"
	// originAssumedFresh: the emulator could not tell how the task was made and treats it
	// as a fresh process (-1). Such tasks are counted in Stats.AssumedFresh.
	originAssumedFresh taskOrigin = "assumed-fresh"
)

// taskEntry is the emulator's record of one task: the kernel's numa_preferred_nid_force
// and numa_preferred_nid, and the task's identity. It is stored as a file shaped like the
// NUMA lines of /proc/<tid>/sched, so numa.ParseSchedNUMA reads it:
//
//	numapref-emulator (1234, tgid 1234)
//	-------------------------------------------------------------------
//	numa_preferred_nid_force                     :                    1
//	numa_preferred_nid                           :                    1
//	start_time                                   :             26001234
//	origin                                       :                  set
type taskEntry struct {
	TID, TGID int
	// Start is the task's start time (clock ticks after boot); with TID it names the task.
	Start     uint64
	Force     int
	Preferred int
	Origin    taskOrigin
}

// isDefault reports whether the entry holds what a fresh process has.
func (e taskEntry) isDefault() bool { return e.Force == numa.NoNode && e.Preferred == numa.NoNode }

func (e taskEntry) format() []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "numapref-emulator (%d, tgid %d)\n", e.TID, e.TGID)
	b.WriteString(strings.Repeat("-", 67) + "\n")
	b.WriteString(formatSchedField("numa_preferred_nid_force", e.Force))
	b.WriteString(formatSchedField("numa_preferred_nid", e.Preferred))
	b.WriteString(formatSchedField("start_time", e.Start))
	b.WriteString(formatSchedField("origin", string(e.Origin)))
	return []byte(b.String())
}

// formatSchedField prints one line the way the kernel's P() macro does ("%-45s:%21Ld").
func formatSchedField(key string, value any) string {
	return fmt.Sprintf("%-45s:%21v\n", key, value)
}

// parseTaskEntry parses what format wrote. Every line must be there.
func parseTaskEntry(text string) (taskEntry, error) {
	lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	if len(lines) != 6 {
		return taskEntry{}, fmt.Errorf("parsing emulator entry: %d lines, want 6", len(lines))
	}
	var e taskEntry
	header, ok := strings.CutPrefix(lines[0], "numapref-emulator (")
	if !ok || !strings.HasSuffix(header, ")") {
		return taskEntry{}, fmt.Errorf("parsing emulator entry: bad header %q", lines[0])
	}
	tid, tgid, ok := strings.Cut(strings.TrimSuffix(header, ")"), ", tgid ")
	if !ok {
		return taskEntry{}, fmt.Errorf("parsing emulator entry: bad header %q", lines[0])
	}
	var err error
	if e.TID, err = parsePositiveID(tid); err != nil {
		return taskEntry{}, fmt.Errorf("parsing emulator entry: tid: %w", err)
	}
	if e.TGID, err = parsePositiveID(tgid); err != nil {
		return taskEntry{}, fmt.Errorf("parsing emulator entry: tgid: %w", err)
	}
	if strings.Trim(lines[1], "-") != "" {
		return taskEntry{}, errors.New("parsing emulator entry: bad separator")
	}
	fields := map[string]string{}
	for _, line := range lines[2:] {
		key, value, ok := strings.Cut(line, ":")
		if !ok {
			return taskEntry{}, fmt.Errorf("parsing emulator entry: bad line %q", line)
		}
		fields[strings.TrimSpace(key)] = strings.TrimSpace(value)
	}
	// The node lines are read as the kernel's sched file is.
	sched, err := numa.ParseSchedNUMA(text)
	if err != nil {
		return taskEntry{}, fmt.Errorf("parsing emulator entry: %w", err)
	}
	if !sched.ForcePresent || !sched.Present {
		return taskEntry{}, errors.New("parsing emulator entry: no numa_preferred_nid_force or numa_preferred_nid line")
	}
	e.Force, e.Preferred = sched.PreferredNIDForce, sched.PreferredNID
	if e.Start, err = strconv.ParseUint(fields["start_time"], 10, 64); err != nil {
		return taskEntry{}, fmt.Errorf("parsing emulator entry: start time: %w", err)
	}
	switch o := taskOrigin(fields["origin"]); o {
	case originSet, originInherited, originAssumedFresh:
		e.Origin = o
	default:
		return taskEntry{}, fmt.Errorf("parsing emulator entry: unknown origin %q", o)
	}
	return e, nil
}

func parsePositiveID(s string) (int, error) {
	v, err := strconv.ParseUint(s, 10, 32)
	if err != nil || v == 0 || v > 1<<31-1 {
		return 0, fmt.Errorf("invalid id %q", s)
	}
	return int(v), nil
}

// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package numa

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// SchedNUMA holds the NUMA lines of /proc/<pid>/sched, printed by the kernel's
// sched_show_numa() when CONFIG_NUMA_BALANCING and CONFIG_SCHED_DEBUG are set:
//
//	mm->numa_scan_seq                            :                    0
//	numa_pages_migrated                          :                    0
//	numa_preferred_nid_force                     :                    1   (patched kernels only)
//	numa_preferred_nid                           :                    1
//	total_numa_faults                            :                    0
//	current_node=0, numa_group_id=0
//	numa_faults node=0 task_private=0 task_shared=0 group_private=0 group_shared=0
type SchedNUMA struct {
	// Present is false when the file has no numa_preferred_nid line: the kernel was built
	// without NUMA balancing.
	Present bool `json:"present"`
	// ForcePresent is true when the numa_preferred_nid_force line exists, which only the
	// PR_PREFERRED_NID patch prints.
	ForcePresent      bool   `json:"forcePresent"`
	PreferredNIDForce int    `json:"preferredNidForce"`
	PreferredNID      int    `json:"preferredNid"`
	ScanSeq           int64  `json:"scanSeq"`
	PagesMigrated     uint64 `json:"pagesMigrated"`
	TotalFaults       uint64 `json:"totalFaults"`
	CurrentNode       int    `json:"currentNode"`
	GroupID           int    `json:"groupId"`
	// Faults has one entry per online node, in the kernel's order.
	Faults []NodeFaults `json:"faults,omitempty"`
}

// NodeFaults is one `numa_faults node=N ...` line.
type NodeFaults struct {
	Node         int    `json:"node"`
	TaskPrivate  uint64 `json:"taskPrivate"`
	TaskShared   uint64 `json:"taskShared"`
	GroupPrivate uint64 `json:"groupPrivate"`
	GroupShared  uint64 `json:"groupShared"`
}

// ReadSchedNUMA reads and parses procRoot/<tid>/sched. A task that does not exist yields an
// error wrapping ErrTaskGone.
func ReadSchedNUMA(procRoot string, tid int) (SchedNUMA, error) {
	data, err := ReadTaskFile(procRoot, tid, "sched")
	if err != nil {
		return SchedNUMA{}, err
	}
	s, err := ParseSchedNUMA(string(data))
	if err != nil {
		return SchedNUMA{}, fmt.Errorf("task %d: %w", tid, err)
	}
	return s, nil
}

// ParseSchedNUMA extracts the NUMA lines from the text of a /proc/<pid>/sched file. Its
// header is never read (see schedBody). Lines it does not know are skipped; a known line
// with a malformed value is an error. Without the force line PreferredNIDForce is -1, as
// the kernel would print it.
func ParseSchedNUMA(text string) (SchedNUMA, error) {
	body, err := schedBody(text)
	if err != nil {
		return SchedNUMA{}, err
	}
	s := SchedNUMA{PreferredNIDForce: -1, PreferredNID: -1, CurrentNode: -1}
	for line := range strings.Lines(body) {
		line = strings.TrimSpace(line)
		var err error
		switch {
		case strings.HasPrefix(line, "current_node="):
			err = parseCurrentNode(line, &s)
		case strings.HasPrefix(line, "numa_faults "):
			var f NodeFaults
			if f, err = parseNodeFaults(line); err == nil {
				s.Faults = append(s.Faults, f)
			}
		default:
			err = parseSchedField(line, &s)
		}
		if err != nil {
			return SchedNUMA{}, fmt.Errorf("parsing sched line %q: %w", line, err)
		}
	}
	return s, nil
}

// maxCommLen is the longest name a task can have: TASK_COMM_LEN (16) less its NUL.
const maxCommLen = 15

// schedBody returns the text after the header of a /proc/<pid>/sched file. The kernel
// prints the header as "<comm> (<pid>, #threads: <n>)" and a line of 67 dashes. A task
// chooses its comm (prctl PR_SET_NAME, or a write to /proc/<pid>/comm): any 15 bytes but
// NUL, newlines included, so the header may span lines that look like NUMA lines. The
// separator is therefore found by what no comm can hold: a line of more than 15 dashes.
// A line made from the comm alone is at most 15 bytes, and the comm's last line goes on
// with " (<pid>, ...". Text without a separator is no sched file.
func schedBody(text string) (string, error) {
	rest := text
	for rest != "" {
		line, after, _ := strings.Cut(rest, "\n")
		if len(line) > maxCommLen && strings.Trim(line, "-") == "" {
			return after, nil
		}
		rest = after
	}
	return "", errors.New("no header separator (a line of dashes): not a sched file")
}

// parseSchedField handles the "key   :   value" lines printed by the kernel's P() macro.
func parseSchedField(line string, s *SchedNUMA) error {
	key, value, ok := strings.Cut(line, ":")
	if !ok {
		return nil
	}
	key, value = strings.TrimSpace(key), strings.TrimSpace(value)
	var err error
	switch key {
	case "mm->numa_scan_seq":
		s.ScanSeq, err = strconv.ParseInt(value, 10, 64)
	case "numa_pages_migrated":
		s.PagesMigrated, err = strconv.ParseUint(value, 10, 64)
	case "numa_preferred_nid_force":
		s.PreferredNIDForce, err = parseNodeID(value)
		s.ForcePresent = true
	case "numa_preferred_nid":
		s.PreferredNID, err = parseNodeID(value)
		s.Present = true
	case "total_numa_faults":
		s.TotalFaults, err = strconv.ParseUint(value, 10, 64)
	}
	return err
}

// parseNodeID parses a node id as the kernel prints an int: -1 (NUMA_NO_NODE) or more.
func parseNodeID(s string) (int, error) {
	v, err := strconv.ParseInt(s, 10, 32)
	if err != nil {
		return 0, err
	}
	if v < -1 {
		return 0, fmt.Errorf("node id %d below -1", v)
	}
	return int(v), nil
}

// parseCurrentNode parses "current_node=0, numa_group_id=0".
func parseCurrentNode(line string, s *SchedNUMA) error {
	for field := range strings.SplitSeq(line, ",") {
		key, value, ok := strings.Cut(strings.TrimSpace(field), "=")
		if !ok {
			return fmt.Errorf("field %q has no '='", field)
		}
		v, err := strconv.ParseInt(value, 10, 32)
		if err != nil {
			return err
		}
		switch key {
		case "current_node":
			s.CurrentNode = int(v)
		case "numa_group_id":
			s.GroupID = int(v)
		}
	}
	return nil
}

// parseNodeFaults parses
// "numa_faults node=0 task_private=0 task_shared=0 group_private=0 group_shared=0".
func parseNodeFaults(line string) (NodeFaults, error) {
	var f NodeFaults
	seen := 0
	for _, field := range strings.Fields(strings.TrimPrefix(line, "numa_faults ")) {
		key, value, ok := strings.Cut(field, "=")
		if !ok {
			return NodeFaults{}, fmt.Errorf("field %q has no '='", field)
		}
		if key == "node" {
			n, err := strconv.ParseInt(value, 10, 32)
			if err != nil || n < 0 {
				return NodeFaults{}, fmt.Errorf("invalid node %q", value)
			}
			f.Node = int(n)
			seen++
			continue
		}
		v, err := strconv.ParseUint(value, 10, 64)
		if err != nil {
			return NodeFaults{}, err
		}
		switch key {
		case "task_private":
			f.TaskPrivate = v
		case "task_shared":
			f.TaskShared = v
		case "group_private":
			f.GroupPrivate = v
		case "group_shared":
			f.GroupShared = v
		}
	}
	if seen == 0 {
		return NodeFaults{}, errors.New("no node= field")
	}
	return f, nil
}

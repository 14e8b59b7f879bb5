// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package numa

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// maxID bounds the node and CPU ids the parsers accept, so that a hostile "0-4294967295"
// cannot make the list parser allocate gigabytes. Linux caps NUMA nodes at 1024
// (NODES_SHIFT 10) and CPUs at 8192.
const maxID = 1 << 16

// ParseList parses the kernel's list format ("0-3,8-11", "0", "" for none), as printed in
// sysfs node/cpu lists and cpuset.mems. It returns the ids sorted, without duplicates.
func ParseList(s string) ([]int, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, nil
	}
	var ids []int
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		first, err := parseListID(lo)
		if err != nil {
			return nil, fmt.Errorf("parsing list %q: %w", s, err)
		}
		last := first
		if isRange {
			if last, err = parseListID(hi); err != nil {
				return nil, fmt.Errorf("parsing list %q: %w", s, err)
			}
			if last < first {
				return nil, fmt.Errorf("parsing list %q: range %q is reversed", s, part)
			}
		}
		for id := first; id <= last; id++ {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return slices.Compact(ids), nil
}

func parseListID(s string) (int, error) {
	if s == "" || strings.TrimSpace(s) != s {
		return 0, fmt.Errorf("empty or padded id %q", s)
	}
	id, err := strconv.Atoi(s)
	if err != nil || id < 0 || id > maxID {
		return 0, fmt.Errorf("invalid id %q", s)
	}
	return id, nil
}

// FormatList prints ids in the kernel's list format, folding runs into ranges.
func FormatList(ids []int) string {
	ids = slices.Compact(slices.Sorted(slices.Values(ids)))
	var b strings.Builder
	for i := 0; i < len(ids); {
		j := i
		for j+1 < len(ids) && ids[j+1] == ids[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(ids[i]))
		if j > i {
			b.WriteByte('-')
			b.WriteString(strconv.Itoa(ids[j]))
		}
		i = j + 1
	}
	return b.String()
}

// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package numa

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/numapref/numapref/internal/fsutil"
)

// Where a cgroup's or a process's memory lies, per node: the cgroup v2 memory.numa_stat and
// /proc/<pid>/numa_maps.

// ReadNumaStatMemory reads a cgroup v2 memory.numa_stat and returns anon+file bytes per
// node: the cgroup's anonymous memory and page cache (file includes shmem and tmpfs).
func ReadNumaStatMemory(path string) (map[int]uint64, error) {
	data, err := fsutil.ReadFileInto(path, nil)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	stat, err := parseNumaStat(string(data))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	perNode := map[int]uint64{}
	for _, item := range []string{"anon", "file"} {
		for node, v := range stat[item] {
			perNode[node] += v
		}
	}
	return perNode, nil
}

// parseNumaStat parses the cgroup v2 memory.numa_stat format: one line per item, the
// item's name then "N<node>=<bytes>" for every node:
//
//	anon N0=1327104 N1=0
//	file N0=4096 N1=0
//
// A line in any other shape (the v1 "total=<pages> N0=..." lines included) is an error.
func parseNumaStat(text string) (map[string]map[int]uint64, error) {
	stat := map[string]map[int]uint64{}
	for line := range strings.Lines(text) {
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		name := fields[0]
		if strings.Contains(name, "=") {
			return nil, fmt.Errorf("line %q: item name %q has '=': not the cgroup v2 format", strings.TrimSpace(line), name)
		}
		if _, dup := stat[name]; dup {
			return nil, fmt.Errorf("item %q appears twice", name)
		}
		nodes := make(map[int]uint64, len(fields)-1)
		for _, f := range fields[1:] {
			node, v, err := parseNodeValue(f)
			if err != nil {
				return nil, fmt.Errorf("line %q: %w", strings.TrimSpace(line), err)
			}
			if _, dup := nodes[node]; dup {
				return nil, fmt.Errorf("line %q: node %d appears twice", strings.TrimSpace(line), node)
			}
			nodes[node] = v
		}
		stat[name] = nodes
	}
	return stat, nil
}

// parseNodeValue parses "N<node>=<value>".
func parseNodeValue(field string) (node int, v uint64, err error) {
	key, value, ok := strings.Cut(field, "=")
	if !ok || len(key) < 2 || key[0] != 'N' {
		return 0, 0, fmt.Errorf("field %q is not N<node>=<value>", field)
	}
	n, err := strconv.ParseUint(key[1:], 10, 32)
	if err != nil || n > maxID {
		return 0, 0, fmt.Errorf("field %q: invalid node", field)
	}
	if v, err = strconv.ParseUint(value, 10, 64); err != nil {
		return 0, 0, fmt.Errorf("field %q: invalid value", field)
	}
	return int(n), v, nil
}

// parseNumaMaps returns the bytes on each node of every mapping in the text of a
// /proc/<pid>/numa_maps file. Pages are counted at the mapping's kernelpagesize_kB
// (huge pages for hugetlb mappings), or pageSize when the line has none.
func parseNumaMaps(text string, pageSize uint64) (map[int]uint64, error) {
	perNode := map[int]uint64{}
	for line := range strings.Lines(text) {
		if strings.TrimSpace(line) == "" {
			continue
		}
		if err := addNumaMapsLine(perNode, line, pageSize); err != nil {
			return nil, err
		}
	}
	return perNode, nil
}

// AddNumaMaps adds the bytes on each node of every mapping in the text of a
// /proc/<pid>/numa_maps file to perNode (see parseNumaMaps). On an error, a malformed
// line or a sum that would overflow, perNode is left unchanged.
func AddNumaMaps(perNode map[int]uint64, text string, pageSize uint64) error {
	proc, err := parseNumaMaps(text, pageSize)
	if err != nil {
		return err
	}
	return addBytes(perNode, proc)
}

// addBytes adds src's bytes per node to dst; a sum that would overflow is an error and
// leaves dst unchanged.
func addBytes(dst, src map[int]uint64) error {
	for node, b := range src {
		if dst[node] > ^uint64(0)-b {
			return fmt.Errorf("bytes on node %d overflow", node)
		}
	}
	for node, b := range src {
		dst[node] += b
	}
	return nil
}

// addNumaMapsLine handles one mapping:
//
//	7f6c2a400000 default file=/usr/lib/libc.so.6 mapped=38 mapmax=3 N0=38 kernelpagesize_kB=4
//
// Only the address, the N<node>=<pages> fields and kernelpagesize_kB are read; other
// fields (policies such as "prefer (many):0-1", file names with escaped spaces) are
// skipped. Sums that would overflow are errors.
func addNumaMapsLine(perNode map[int]uint64, line string, pageSize uint64) error {
	fields := strings.Fields(line)
	if _, err := strconv.ParseUint(fields[0], 16, 64); err != nil {
		return fmt.Errorf("numa_maps line %q: address %q is not hex", strings.TrimSpace(line), fields[0])
	}
	type nodePages struct {
		node  int
		pages uint64
	}
	var pages []nodePages
	size := pageSize
	for _, f := range fields[1:] {
		switch {
		case strings.HasPrefix(f, "kernelpagesize_kB="):
			kb, err := strconv.ParseUint(strings.TrimPrefix(f, "kernelpagesize_kB="), 10, 64)
			if err != nil || kb == 0 || kb > 1<<30 {
				return fmt.Errorf("numa_maps line %q: invalid %q", strings.TrimSpace(line), f)
			}
			size = kb << 10
		case len(f) > 1 && f[0] == 'N' && f[1] >= '0' && f[1] <= '9':
			node, n, err := parseNodeValue(f)
			if err != nil {
				return fmt.Errorf("numa_maps line %q: %w", strings.TrimSpace(line), err)
			}
			pages = append(pages, nodePages{node, n})
		}
	}
	for _, p := range pages {
		if p.pages > 0 && size > ^uint64(0)/p.pages {
			return fmt.Errorf("numa_maps line %q: %d pages of %d bytes overflow", strings.TrimSpace(line), p.pages, size)
		}
		b := p.pages * size
		if perNode[p.node] > ^uint64(0)-b {
			return fmt.Errorf("numa_maps line %q: bytes on node %d overflow", strings.TrimSpace(line), p.node)
		}
		perNode[p.node] += b
	}
	return nil
}

// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package migrate

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/numapref/numapref/internal/numa"
)

// span is one mapping of a process's address space: [start, end).
type span struct {
	start, end uint64
}

// readSpans reads the mappings of process pid whose pages may move, from
// procRoot/<pid>/maps.
func readSpans(procRoot string, pid int) ([]span, error) {
	data, err := numa.ReadTaskFile(procRoot, pid, "maps")
	if err != nil {
		return nil, err
	}
	spans, err := parseMaps(string(data))
	if err != nil {
		return nil, fmt.Errorf("process %d: %w", pid, err)
	}
	return spans, nil
}

// parseMaps parses the text of a /proc/<pid>/maps:
//
//	7f6c2a400000-7f6c2a422000 r--p 00000000 fe:00 325835   /usr/lib/x86_64-linux-gnu/libc.so.6
//
// and keeps the mappings whose pages may move. It leaves out the kernel's own ([vdso],
// [vvar], [vsyscall], [uprobes]) and the inaccessible ones (---p, ---s): those are guard
// pages and reservations, such as a runtime's unused heap, which hold no page but can be
// gigabytes long, so a walk over their addresses would cost without moving anything.
func parseMaps(text string) ([]span, error) {
	var spans []span
	for line := range strings.Lines(text) {
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		if len(fields) < 5 {
			return nil, fmt.Errorf("maps line %q: too few fields", strings.TrimSpace(line))
		}
		lo, hi, ok := strings.Cut(fields[0], "-")
		start, err1 := strconv.ParseUint(lo, 16, 64)
		end, err2 := strconv.ParseUint(hi, 16, 64)
		if !ok || err1 != nil || err2 != nil || end <= start {
			return nil, fmt.Errorf("maps line %q: invalid range %q", strings.TrimSpace(line), fields[0])
		}
		if strings.HasPrefix(fields[1], "---") {
			continue
		}
		if len(fields) >= 6 {
			switch fields[5] {
			case "[vdso]", "[vvar]", "[vvar_vclock]", "[vsyscall]", "[uprobes]":
				continue
			}
		}
		spans = append(spans, span{start, end})
	}
	return spans, nil
}

// addresses appends to dst the page addresses from cursor on, at least n (when the spans
// have them) and ending at a multiple of align or at a span's end, and returns them with
// the address after the last one; next is 0 and done true when the spans end. align is
// the size of a huge page (a multiple of page): the kernel moves a huge page whole at the
// first of its addresses it is given, so a batch that holds every address of the huge
// pages it reaches counts them all where they are after the move, and the next batch
// does not start in one that has moved. A batch holds at most align/page - 1 addresses
// more than n.
func addresses(dst []uintptr, spans []span, cursor uint64, page, align uint64, n int) (out []uintptr, next uint64, done bool) {
	out = dst[:0]
	for _, s := range spans {
		if s.end <= cursor {
			continue
		}
		first := max(s.start, cursor&^(page-1))
		for a := first; a < s.end; a += page {
			if len(out) >= n && (a%align == 0 || a == first) { // no huge page spans two mappings
				return out, a, false
			}
			out = append(out, uintptr(a))
		}
	}
	return out, 0, true
}

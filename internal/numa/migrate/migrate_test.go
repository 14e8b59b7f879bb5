// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package migrate

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/numapref/numapref/internal/numa"
)

const fixtureRoot = "testdata/proc"

func TestParseMapsLeavesOutWhatHoldsNoMovablePage(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(fixtureRoot, "4242", "maps"))
	if err != nil {
		t.Fatal(err)
	}
	spans, err := parseMaps(string(data))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Count(string(data), "\n")
	// The fixture has a reservation (---p), [vvar], [vvar_vclock], [vdso] and [vsyscall].
	if want := lines - 5; len(spans) != want {
		t.Errorf("parseMaps kept %d of %d mappings; want %d", len(spans), lines, want)
	}
	for _, s := range spans {
		if s.start == 0x600000000000 || s.start == 0xffffffffff600000 {
			t.Errorf("parseMaps kept %x-%x", s.start, s.end)
		}
		if s.end <= s.start {
			t.Errorf("span %x-%x is empty", s.start, s.end)
		}
	}
	for _, bad := range []string{"zz-10 rw-p 0 00:00 0\n", "10-5 rw-p 0 00:00 0\n", "10-20 rw-p\n", "1020 rw-p 0 00:00 0\n"} {
		if _, err := parseMaps(bad); err == nil {
			t.Errorf("parseMaps(%q): no error", bad)
		}
	}
}

// addressesCase is a call of addresses from cursor for n addresses, and what it returns.
type addressesCase struct {
	cursor uint64
	n      int
	want   []uintptr
	next   uint64
	done   bool
}

// checkAddresses runs each case over spans, with pages of 4 KiB and huge pages of align.
func checkAddresses(t *testing.T, spans []span, align uint64, tests map[string]addressesCase) {
	t.Helper()
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, next, done := addresses(nil, spans, tc.cursor, 0x1000, align, tc.n)
			if !equal(got, tc.want) || next != tc.next || done != tc.done {
				t.Errorf("addresses(%#x, %d) = %#x, %#x, %v; want %#x, %#x, %v", tc.cursor, tc.n, got, next, done, tc.want, tc.next, tc.done)
			}
		})
	}
}

func TestAddresses(t *testing.T) {
	checkAddresses(t, []span{{0x1000, 0x3000}, {0x10000, 0x12000}}, 0x1000, map[string]addressesCase{
		"all":                 {0, 10, []uintptr{0x1000, 0x2000, 0x10000, 0x11000}, 0, true},
		"the first two":       {0, 2, []uintptr{0x1000, 0x2000}, 0x10000, false},
		"from a cursor":       {0x2000, 2, []uintptr{0x2000, 0x10000}, 0x11000, false},
		"an unaligned cursor": {0x2800, 1, []uintptr{0x2000}, 0x10000, false},
		"between the spans":   {0x5000, 10, []uintptr{0x10000, 0x11000}, 0, true},
		"past the end":        {0x12000, 10, nil, 0, true},
		"exactly to the end":  {0x10000, 2, []uintptr{0x10000, 0x11000}, 0, true},
	})
}

// With huge pages of four pages, a batch ends at a huge page's boundary or at a mapping's
// end, never inside a huge page, so that the pages the kernel moves with the first of a
// huge page's addresses are all in the batch that counts them.
func TestAddressesEndAtAHugePage(t *testing.T) {
	checkAddresses(t, []span{{0x0, 0x8000}, {0x9000, 0xa000}}, 0x4000, map[string]addressesCase{
		"one asked, the huge page given":      {0, 1, []uintptr{0x0, 0x1000, 0x2000, 0x3000}, 0x4000, false},
		"from inside a huge page to its end":  {0x1000, 1, []uintptr{0x1000, 0x2000, 0x3000}, 0x4000, false},
		"five asked, two huge pages":          {0, 5, []uintptr{0x0, 0x1000, 0x2000, 0x3000, 0x4000, 0x5000, 0x6000, 0x7000}, 0x9000, false},
		"at a boundary, exactly":              {0, 4, []uintptr{0x0, 0x1000, 0x2000, 0x3000}, 0x4000, false},
		"to the mapping's end, not beyond":    {0x5000, 1, []uintptr{0x5000, 0x6000, 0x7000}, 0x9000, false},
		"an unaligned mapping ends the spans": {0x9000, 1, []uintptr{0x9000}, 0, true},
	})
}

func equal(a, b []uintptr) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestNodePages(t *testing.T) {
	got, err := NodePages(fixtureRoot, 4242, 4096)
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(fixtureRoot, "4242", "numa_maps"))
	if err != nil {
		t.Fatal(err)
	}
	var want uint64
	for f := range strings.FieldsSeq(string(data)) {
		if n, ok := strings.CutPrefix(f, "N0="); ok {
			var v uint64
			for _, c := range n {
				v = v*10 + uint64(c-'0')
			}
			want += v
		}
	}
	if len(got) != 1 || got[0] != want {
		t.Errorf("NodePages = %v; want node 0: %d pages", got, want)
	}
	if _, err := NodePages(fixtureRoot, 7, 4096); !numa.IsTaskGone(err) {
		t.Errorf("NodePages of a missing process: %v; want it gone", err)
	}
}

func TestMemsAllowed(t *testing.T) {
	got, err := MemsAllowed(fixtureRoot, 4242)
	if err != nil || got.String() != "1" {
		t.Errorf("MemsAllowed = %s, %v; want 1", got, err)
	}
	if _, err := MemsAllowed(fixtureRoot, 7); !numa.IsTaskGone(err) {
		t.Errorf("MemsAllowed of a missing process: %v; want it gone", err)
	}
}

// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestReadOnlyMappingsOf picks the executable's text and read-only data from a maps file,
// and leaves its writable data, other files' mappings, a path that only begins like the
// executable's and anonymous mappings alone.
func TestReadOnlyMappingsOf(t *testing.T) {
	maps := filepath.Join(t.TempDir(), "maps")
	fixture := `00400000-01a5b000 r-xp 00000000 fe:00 10002449                           /usr/bin/numapref
01a5b000-03251000 r--p 0165b000 fe:00 10002449                           /usr/bin/numapref
03251000-032f8000 rw-p 02e51000 fe:00 10002449                           /usr/bin/numapref
032f8000-05300000 rw-p 00000000 00:00 0 
04000000-04100000 r--p 00000000 fe:00 10002450                           /usr/bin/numapref-old
7f0000000000-7f0000001000 r--p 00000000 fe:00 20000001                   /etc/ld.so.cache
7ffc00000000-7ffc00021000 rw-p 00000000 00:00 0                          [stack]
`
	if err := os.WriteFile(maps, []byte(fixture), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := readOnlyMappingsOf(maps, "/usr/bin/numapref")
	if err != nil {
		t.Fatal(err)
	}
	want := []addrRange{{start: 0x400000, end: 0x1a5b000}, {start: 0x1a5b000, end: 0x3251000}}
	if !slices.Equal(got, want) {
		t.Fatalf("mappings %#v, want %#v", got, want)
	}
}

// TestReadOnlyMappingsOfRefusesABadRange refuses a line whose range cannot be read,
// rather than advise an address it guessed.
func TestReadOnlyMappingsOfRefusesABadRange(t *testing.T) {
	maps := filepath.Join(t.TempDir(), "maps")
	if err := os.WriteFile(maps, []byte("01a5b000-00400000 r-xp 00000000 fe:00 1 /x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, err := readOnlyMappingsOf(maps, "/x"); err == nil {
		t.Fatalf("an end below the start gave %#v, want an error", got)
	}
}

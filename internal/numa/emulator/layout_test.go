// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package emulator

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// statLine is a /proc/<pid>/stat line as Linux 6.18 prints it, with comm and starttime
// (field 22) substituted.
func statLine(comm string, start string) string {
	return "4242 (" + comm + ") S 1 4242 4242 0 -1 4194560 137 0 0 0 0 0 0 0 20 0 1 0 " + start +
		" 5754880 224 18446744073709551615 94244216213504 94244216231377 140736522586144 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0" +
		" 94244216243440 94244216244808 94244245450752 140736522593727 140736522593747 140736522593747 140736522596331 0\n"
}

func TestParseStatLayout(t *testing.T) {
	want := memLayout{94244216213504, 94244216231377, 140736522586144, 94244216243440, 94244216244808,
		94244245450752, 140736522593727, 140736522593747, 140736522593747, 140736522596331}
	got, ok, err := parseStatLayout(statLine("cat", "1"))
	if err != nil || !ok {
		t.Fatalf("parseStatLayout: ok %v, error %v", ok, err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	// A reader without ptrace access sees zeros (and 1 for start_code and end_code).
	hidden := strings.Replace(statLine("cat", "1"), "94244216213504 94244216231377 140736522586144", "1 1 0", 1)
	if _, ok, err := parseStatLayout(hidden); err != nil || ok {
		t.Errorf("hidden layout: ok %v, error %v; want not ok, no error", ok, err)
	}
	if _, _, err := parseStatLayout("1 (x) S 1 2 3"); err == nil {
		t.Error("short stat line: no error")
	}
}

func FuzzParseStatLayout(f *testing.F) {
	f.Add(statLine("cat", "26001234"))
	f.Add(statLine("a) b (c", "1"))
	f.Add("1 (x) S")
	f.Add(")")
	f.Fuzz(func(t *testing.T, s string) {
		_, _, _ = parseStatLayout(s)
	})
}

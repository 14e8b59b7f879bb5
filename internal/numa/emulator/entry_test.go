// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package emulator

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/numapref/numapref/internal/numa"
)

func TestTaskEntryRoundTrip(t *testing.T) {
	e := taskEntry{TID: 12, TGID: 10, Start: 26001234, Force: 1, Preferred: 1, Origin: originInherited}
	text := string(e.format())
	got, err := parseTaskEntry(text)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(e, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	// The entry reads like /proc/<pid>/sched.
	s, err := numa.ParseSchedNUMA(text)
	if err != nil {
		t.Fatal(err)
	}
	if !s.ForcePresent || s.PreferredNIDForce != 1 || s.PreferredNID != 1 {
		t.Errorf("ParseSchedNUMA of an entry = %+v, want force 1, preferred 1", s)
	}
}

func FuzzParseTaskEntry(f *testing.F) {
	f.Add(string(taskEntry{TID: 12, TGID: 10, Start: 5, Force: 1, Preferred: 1, Origin: originSet}.format()))
	f.Add(string(taskEntry{TID: 1, TGID: 1, Start: 0, Force: -1, Preferred: -1, Origin: originAssumedFresh}.format()))
	f.Add("numapref-emulator (1, tgid 1)\n-\n")
	f.Fuzz(func(t *testing.T, s string) {
		e, err := parseTaskEntry(s)
		if err != nil {
			return
		}
		again, err := parseTaskEntry(string(e.format()))
		if err != nil || again != e {
			t.Fatalf("round trip of %+v: %+v, %v", e, again, err)
		}
	})
}

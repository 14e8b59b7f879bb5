// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// Only the assert_clock_updated WARNING reached through prctl_chg_pref_nid passes, counted
// per backtrace; every other report fails the log, and with the waiver off (the control
// kernel) the known one fails too.
func TestClassifyCapturedAndBuiltSamples(t *testing.T) {
	const known = "set_next_entity <- set_next_task_fair <- sched_setnuma <- prctl_chg_pref_nid <- __x64_sys_prctl <- do_syscall_64 <- entry_SYSCALL_64_after_hwframe"
	tests := map[string]struct {
		noWaiver  bool
		ok        bool
		known     map[string]int
		failKinds []string
	}{
		"control-clean.log":         {ok: true},
		"patched-known-warning.log": {ok: true, known: map[string]int{known: 1}},
		"known-per-backtrace.log": {ok: true, known: map[string]int{
			known: 2,
			"dequeue_task_fair <- sched_setnuma <- prctl_chg_pref_nid <- __x64_sys_prctl <- do_syscall_64 <- entry_SYSCALL_64_after_hwframe": 1,
		}},
		"known-warning-elsewhere.log":          {failKinds: []string{"WARNING"}},
		"other-warning-via-prctl.log":          {failKinds: []string{"WARNING"}},
		"rcu-stall.log":                        {failKinds: []string{"INFO"}},
		"hung-task.log":                        {failKinds: []string{"INFO"}},
		"ubsan.log":                            {failKinds: []string{"UBSAN"}},
		"bug-oops.log":                         {failKinds: []string{"BUG", "Oops"}},
		"bare-call-trace.log":                  {failKinds: []string{"Call Trace"}},
		"known-then-hung-task.log":             {known: map[string]int{known: 1}, failKinds: []string{"INFO"}},
		"patched-known-warning.log, no waiver": {noWaiver: true, failKinds: []string{"WARNING"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			file, _, _ := strings.Cut(name, ",")
			data, err := os.ReadFile(filepath.Join("testdata", file))
			if err != nil {
				t.Fatal(err)
			}
			v, err := classify(bytes.NewReader(data), !tc.noWaiver)
			if err != nil {
				t.Fatal(err)
			}
			want := tc.known
			if want == nil {
				want = map[string]int{}
			}
			if diff := cmp.Diff(want, v.Known); diff != "" {
				t.Errorf("waived backtraces (-want +got):\n%s", diff)
			}
			var kinds []string
			for k := range v.Other {
				kind, _, _ := strings.Cut(k, ": ")
				kinds = append(kinds, kind)
			}
			if diff := cmp.Diff(tc.failKinds, kinds, sortKinds); diff != "" {
				t.Errorf("failing reports (-want +got):\n%s", diff)
			}
			var out bytes.Buffer
			ok, err := check(bytes.NewReader(data), &out, !tc.noWaiver)
			if err != nil {
				t.Fatal(err)
			}
			if ok != (len(tc.failKinds) == 0) {
				t.Errorf("check() = %v, want %v:\n%s", ok, !ok, out.String())
			}
		})
	}
}

var sortKinds = cmp.Transformer("sort", func(in []string) []string {
	out := append([]string(nil), in...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
})

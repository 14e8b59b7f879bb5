// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package emulator

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseTraceLine(t *testing.T) {
	tests := map[string]struct {
		line     string
		want     traceBirth
		wantKind traceLine
	}{
		"vfork (host 6.18)": {
			line:     "       numa.test-5101    [001] .N...  9192.945598: task_newtask: pid=5104 comm=numa.test clone_flags=5100 oom_score_adj=0",
			want:     traceBirth{PID: 5104, Creator: 5101, Flags: 0x5100, CPU: 1, TimeUs: 9192945598},
			wantKind: traceLineBirth,
		},
		"thread, comm with spaces and dashes": {
			line:     " my-odd comm-77-42    [000] d..1.    12.000007: task_newtask: pid=43 comm=my-odd comm-77 clone_flags=3d0f00 oom_score_adj=-1000",
			want:     traceBirth{PID: 43, Creator: 42, Flags: 0x3d0f00, CPU: 0, TimeUs: 12000007},
			wantKind: traceLineBirth,
		},
		"comm forging a clone_flags field": {
			line:     "x clone_flags=1-9 [003] .....  1.000001: task_newtask: pid=10 comm=x clone_flags=1 clone_flags=11 oom_score_adj=0",
			want:     traceBirth{PID: 10, Creator: 9, Flags: 0x11, CPU: 3, TimeUs: 1000001},
			wantKind: traceLineBirth,
		},
		"record-tgid, no irq-info": {
			line:     "           bash-1234    (   1234) [002]   100.500000: task_newtask: pid=1300 comm=bash clone_flags=1200011 oom_score_adj=0",
			want:     traceBirth{PID: 1300, Creator: 1234, Flags: 0x1200011, CPU: 2, TimeUs: 100500000},
			wantKind: traceLineBirth,
		},
		"creator not known": {
			line:     "           <...>-0       [000] d..1.     5.000000: task_newtask: pid=2 comm=swapper/0 clone_flags=800711 oom_score_adj=0",
			want:     traceBirth{PID: 2, Flags: 0x800711, TimeUs: 5000000},
			wantKind: traceLineBirth,
		},
		"lost events":      {line: "CPU:1 [LOST 123 EVENTS]", want: traceBirth{CPU: 1}, wantKind: traceLineLost},
		"another event":    {line: "  bash-1 [000] .....  1.000000: task_rename: pid=1 oldcomm=a newcomm=b oom_score_adj=0", wantKind: traceLineOther},
		"bad time":         {line: "  bash-1 [000] .....  1.5: task_newtask: pid=2 comm=bash clone_flags=11 oom_score_adj=0", wantKind: traceLineOther},
		"bad flags":        {line: "  bash-1 [000] .....  1.000000: task_newtask: pid=2 comm=bash clone_flags=zz oom_score_adj=0", wantKind: traceLineOther},
		"no pid":           {line: "  bash-1 [000] .....  1.000000: task_newtask: comm=bash clone_flags=11 oom_score_adj=0", wantKind: traceLineOther},
		"empty":            {line: "", wantKind: traceLineOther},
		"truncated lost":   {line: "CPU:x [LOST 1 EVENTS]", wantKind: traceLineOther},
		"no cpu column":    {line: "bash-1 .....  1.000000: task_newtask: pid=2 comm=bash clone_flags=11 oom_score_adj=0", wantKind: traceLineOther},
		"header too short": {line: "1.000000: task_newtask: pid=2 comm=bash clone_flags=11 oom_score_adj=0", wantKind: traceLineOther},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, kind := parseTraceLine(tc.line)
			if kind != tc.wantKind {
				t.Fatalf("kind %d, want %d", kind, tc.wantKind)
			}
			if kind == traceLineOther {
				return
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestBirthLog(t *testing.T) {
	l := newBirthLog(10_000_000) // 10 s
	birth := func(pid int, us uint64, flags uint64) {
		l.add(traceBirth{PID: pid, Creator: 1, Flags: flags, TimeUs: us}, traceLineBirth, us)
	}
	birth(100, 1_000_000, 0x11)
	birth(100, 3_000_000, 0x4100) // pid 100 recycled: a vfork child this time
	birth(200, 3_500_000, 0x11)

	type answer struct {
		Flags  uint64
		Answer birthAnswer
	}
	find := func(pid int, ns uint64) answer {
		b, a := l.find(pid, ns)
		return answer{b.Flags, a}
	}
	tests := map[string]struct {
		pid  int
		ns   uint64
		want answer
	}{
		"first life":                         {100, 999_999_000, answer{0x11, birthFound}},
		"second life":                        {100, 2_999_999_000, answer{0x4100, birthFound}},
		"a hair ahead of the trace clock":    {100, 3_000_500_000, answer{0x4100, birthFound}},
		"not traced yet":                     {100, 3_600_000_000, answer{0, birthNotYet}},
		"unknown pid":                        {300, 1_000_000_000, answer{0, birthNotYet}},
		"other pid, not confused with reuse": {200, 3_400_000_000, answer{0x11, birthFound}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, find(tc.pid, tc.ns)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}

	// A loss read at 4 s: nothing born up to then can be vouched for; later births can.
	l.add(traceBirth{CPU: 0}, traceLineLost, 4_000_000)
	if got := find(200, 3_400_000_000); got.Answer != birthUncertain {
		t.Errorf("after a loss, a birth before it: %+v, want uncertain", got)
	}
	birth(300, 5_000_000, 0x11)
	if got := find(300, 4_900_000_000); got != (answer{0x11, birthFound}) {
		t.Errorf("a birth after the loss: %+v, want found", got)
	}

	// Births older than the horizon are forgotten.
	birth(400, 14_000_000, 0x11)
	if _, ok := l.byPID[100]; ok {
		t.Errorf("births of pid 100 (1 s and 3 s) kept at 14 s with a 10 s horizon")
	}
	if got := find(300, 4_900_000_000); got.Answer != birthFound {
		t.Errorf("pid 300 (5 s) forgotten at 14 s: %+v", got)
	}
	if l.births != 5 || l.lost != 1 || len(l.queue) != 2 {
		t.Errorf("births %d, lost %d, kept %d; want 5, 1, 2", l.births, l.lost, len(l.queue))
	}
}

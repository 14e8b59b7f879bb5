// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const (
	getOK    = `{"label":"get","cmd":0,"target":"self","nid":0,"ptr":"valid","ret":0,"errno":"","stored":true,"value":-1}`
	getNode1 = `{"label":"get","cmd":0,"target":"self","nid":0,"ptr":"valid","ret":0,"errno":"","stored":true,"value":1}`
	getEPERM = `{"label":"get","cmd":0,"target":"self","nid":0,"ptr":"valid","ret":-1,"errno":"EPERM","stored":false,"value":-1515870810}`
	setOK    = `{"label":"set","cmd":1,"target":"self","nid":1,"ptr":"nil","ret":0,"errno":"","stored":false,"value":-1515870810}`
	setNode0 = `{"label":"set","cmd":1,"target":"self","nid":0,"ptr":"nil","ret":0,"errno":"","stored":false,"value":-1515870810}`
	spawnGet = `{"label":"child-of-spawner: get-self","cmd":0,"target":"self","nid":0,"ptr":"valid","ret":0,"errno":"","stored":true,"value":%d}`
)

func line(backend, name string, pass bool, calls []string, extra string) string {
	p := "true"
	if !pass {
		p = "false"
	}
	return `{"case":"` + name + `","backend":"` + backend + `","pass":` + p + `,"calls":[` + strings.Join(calls, ",") + `]` + extra + "}\n"
}

func spawn(v int) string { return strings.Replace(spawnGet, "%d", strconv.Itoa(v), 1) }

func TestCompare(t *testing.T) {
	const noteFresh = `,"notes":["get-self: -1, the backend assumed the task fresh (counted)"]`
	tests := map[string]struct {
		a, b       string
		opts       options
		wantOK     bool
		calls      int
		agree      int
		known      int
		wantOutput []string
	}{
		"identical": {
			a:      line("prctl", "one", true, []string{getOK, setOK}, `,"observed":{"x":1}`),
			b:      line("emulator", "one", true, []string{getOK, setOK}, `,"observed":{"x":1}`),
			wantOK: true, calls: 2, agree: 2,
			wantOutput: []string{"case one: agree (2/2 calls, 1/1 observed)", "2/2 calls agree (100%)", "1/1 observed values agree (100%)", "RESULT: PASS"},
		},
		"errno differs": {
			a:          line("prctl", "one", true, []string{getEPERM}, ""),
			b:          line("emulator", "one", true, []string{getOK}, ""),
			calls:      1,
			agree:      0,
			wantOutput: []string{"DIFF  get: A ret -1 errno EPERM value none, B ret 0 errno - value -1", "0/1 calls agree (0.0%)", "RESULT: FAIL (1 disagreements)"},
		},
		"value differs": {
			a:          line("prctl", "one", true, []string{getNode1}, ""),
			b:          line("emulator", "one", true, []string{getOK}, ""),
			calls:      1,
			wantOutput: []string{"DIFF  get: A ret 0 errno - value 1, B ret 0 errno - value -1"},
		},
		"call missing on one side": {
			a:          line("prctl", "one", true, []string{getOK, setOK}, ""),
			b:          line("emulator", "one", true, []string{getOK}, ""),
			calls:      2,
			agree:      1,
			wantOutput: []string{"DIFF  set: only in A", "1/2 calls agree (50.0%)"},
		},
		"different call under one label": {
			a:          line("prctl", "one", true, []string{setOK}, ""),
			b:          line("emulator", "one", true, []string{setNode0}, ""),
			calls:      1,
			wantOutput: []string{"different calls"},
		},
		"case missing in B": {
			a:          line("prctl", "one", true, []string{getOK}, "") + line("prctl", "two", true, []string{getOK}, ""),
			b:          line("emulator", "one", true, []string{getOK}, ""),
			calls:      1,
			agree:      1,
			wantOutput: []string{"case two: MISSING in B", "1/2 cases agree"},
		},
		"case missing in A": {
			a:          line("prctl", "one", true, []string{getOK}, ""),
			b:          line("emulator", "one", true, []string{getOK}, "") + line("emulator", "extra", true, []string{getOK}, ""),
			calls:      1,
			agree:      1,
			wantOutput: []string{"case extra: MISSING in A"},
		},
		"observed differs": {
			a:          line("prctl", "one", true, []string{getOK}, `,"observed":{"n":7,"only-a":1}`),
			b:          line("emulator", "one", true, []string{getOK}, `,"observed":{"n":6}`),
			calls:      1,
			agree:      1,
			wantOutput: []string{"DIFF  observed n: A 7, B 6", "DIFF  observed only-a: A 1, B missing", "0/2 observed values agree"},
		},
		"failed case": {
			a:          line("prctl", "one", false, []string{getOK}, ""),
			b:          line("emulator", "one", true, []string{getOK}, ""),
			calls:      1,
			agree:      1,
			wantOutput: []string{"DIFF  case result: A FAIL, B pass"},
		},
		"skipped on one side": {
			a:          line("prctl", "one", true, nil, `,"skipped":true`),
			b:          line("emulator", "one", true, []string{getOK}, ""),
			wantOutput: []string{"case one: DIFF skipped on A only"},
		},
		"skipped on both, nothing compared": {
			a:          line("prctl", "one", true, nil, `,"skipped":true`),
			b:          line("emulator", "one", true, nil, `,"skipped":true`),
			wantOutput: []string{"skipped on both sides", "RESULT: FAIL (no call compared)"},
		},
		"repeated labels pair by occurrence": {
			a:      line("prctl", "one", true, []string{getOK, getNode1}, ""),
			b:      line("emulator", "one", true, []string{getOK, getNode1}, ""),
			wantOK: true, calls: 2, agree: 2,
			wantOutput: []string{"ok    get#2: ret 0 errno - value 1"},
		},
		"assumed fresh is a disagreement by default": {
			a:          line("prctl", "vfork", true, []string{spawn(1)}, ""),
			b:          line("emulator", "vfork", true, []string{spawn(-1)}, noteFresh),
			calls:      1,
			wantOutput: []string{"DIFF  child-of-spawner: get-self", "note (B) get-self: -1, the backend assumed the task fresh (counted)"},
		},
		"assumed fresh accepted on request, not counted as agreement": {
			a:      line("prctl", "vfork", true, []string{spawn(1)}, ""),
			b:      line("emulator", "vfork", true, []string{spawn(-1)}, noteFresh),
			opts:   options{acceptAssumedFresh: true},
			wantOK: true, calls: 1, agree: 0, known: 1,
			wantOutput: []string{"KNOWN child-of-spawner: get-self", "0/1 calls agree (0.0%)", "1 calls differ only because the emulator assumed a task fresh", "RESULT: PASS"},
		},
		"without the emulator's note, -1 is not accepted": {
			a:     line("prctl", "vfork", true, []string{spawn(1)}, ""),
			b:     line("emulator", "vfork", true, []string{spawn(-1)}, ""),
			opts:  options{acceptAssumedFresh: true},
			calls: 1,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			a, err := readReport("a.jsonl", strings.NewReader(tc.a))
			if err != nil {
				t.Fatal(err)
			}
			b, err := readReport("b.jsonl", strings.NewReader(tc.b))
			if err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			s := compare(&out, a, b, tc.opts)
			if s.ok() != tc.wantOK || s.Calls != tc.calls || s.CallsAgree != tc.agree || s.KnownCalls != tc.known {
				t.Errorf("ok %v calls %d agree %d known %d; want ok %v calls %d agree %d known %d\n%s",
					s.ok(), s.Calls, s.CallsAgree, s.KnownCalls, tc.wantOK, tc.calls, tc.agree, tc.known, out.String())
			}
			for _, want := range tc.wantOutput {
				if !strings.Contains(out.String(), want) {
					t.Errorf("output lacks %q:\n%s", want, out.String())
				}
			}
		})
	}
}

func TestReadReportErrors(t *testing.T) {
	for name, in := range map[string]string{
		"not json":     "{\n",
		"no case":      `{"backend":"prctl"}` + "\n",
		"case twice":   line("prctl", "one", true, nil, "") + line("prctl", "one", true, nil, ""),
		"unknown type": `{"case":"one","calls":"x"}` + "\n",
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := readReport("r", strings.NewReader(in)); err == nil {
				t.Error("no error")
			}
		})
	}
	rep, err := readReport("r", strings.NewReader("\n"+line("prctl", "one", true, []string{getOK}, "")+"\n"))
	if err != nil || len(rep.cases) != 1 {
		t.Errorf("blank lines: %v, %d cases", err, len(rep.cases))
	}
}

func TestRunExitStatus(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	same := write("same.jsonl", line("prctl", "one", true, []string{getOK}, ""))
	same2 := write("same2.jsonl", line("emulator", "one", true, []string{getOK}, ""))
	other := write("other.jsonl", line("emulator", "one", true, []string{getEPERM}, ""))
	for name, tc := range map[string]struct {
		args []string
		want int
	}{
		"agree":        {[]string{same, same2}, 0},
		"disagree":     {[]string{same, other}, 1},
		"missing file": {[]string{same, filepath.Join(dir, "none")}, 2},
		"one argument": {[]string{same}, 2},
		"bad flag":     {[]string{"-nope", same, same2}, 2},
	} {
		t.Run(name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			if got := run(tc.args, &out, &errOut); got != tc.want {
				t.Errorf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", got, tc.want, out.String(), errOut.String())
			}
		})
	}
}

// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build linux

package emulator

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestEmulatorAudit: every successful SET, and only those, is logged with the target's
// identity and its cgroups read at SET time; a target gone or exiting when its cgroups
// were read is logged as gone; GETs and refused calls are not logged.
func TestEmulatorAudit(t *testing.T) {
	proc := newFakeProc(t)
	proc.task(100, 100, 500, 0, true)
	writeFile(t, filepath.Join(proc.root, "100", "cgroup"), "4:pids:/lab/kubepods/podA/c1\n1:cpuset:/lab/kubepods/podA/c1\n")
	proc.task(101, 100, 501, 0, true) // no cgroup file: exited before it was read
	// Exiting (PF_EXITING in stat's flags): the kernel shows it in the root of every v1
	// hierarchy, which says nothing about where it was.
	proc.task(102, 100, 502, 0, true)
	writeFile(t, filepath.Join(proc.root, "102", "stat"), strings.Replace(statLine("task", "502"), " 4194560 ", " 4194564 ", 1))
	writeFile(t, filepath.Join(proc.root, "102", "cgroup"), "4:pids:/\n")
	e := newTestEmulator(t, proc, "testdata/sysfs/two-nodes", t.TempDir())
	_ = e.Set(100, 0) // before AuditTo: not logged
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	if err := e.AuditTo(path); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ tid, nid int }{{100, 1}, {101, 0}, {102, 1}, {100, 5}, {999, 0}, {100, -1}} {
		_ = e.Set(c.tid, c.nid) // 5: EINVAL, 999: ESRCH: not logged
	}
	if _, err := e.Get(100); err != nil {
		t.Fatal(err)
	}
	e.Close()
	got, cut, err := ReadAudit(path)
	if err != nil || cut != 0 {
		t.Fatalf("ReadAudit: %d cut records, %v", cut, err)
	}
	cg := []string{"4:pids:/lab/kubepods/podA/c1", "1:cpuset:/lab/kubepods/podA/c1"}
	want := []AuditRecord{
		{TID: 100, TGID: 100, Start: 500, NID: 1, Cgroup: cg},
		{TID: 101, TGID: 100, Start: 501, NID: 0, Gone: true},
		{TID: 102, TGID: 100, Start: 502, NID: 1, Gone: true},
		{TID: 100, TGID: 100, Start: 500, NID: -1, Cgroup: cg},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("audit log (-want +got):\n%s", d)
	}
	if err := e.AuditTo(path); err == nil {
		t.Error("AuditTo after Close succeeded")
	}
}

// A writer killed mid-record leaves the record cut short; the records around it still
// read, and the cut one is counted. Anything else malformed is an error.
func TestReadAuditCutRecord(t *testing.T) {
	dir := t.TempDir()
	whole := `{"tid":7,"tgid":7,"start":9,"nid":1,"gone":true}`
	cutLog := filepath.Join(dir, "cut.jsonl")
	if err := os.WriteFile(cutLog, []byte("\n"+whole+"\n"+"\n"+`{"tid":8,"tgid":8,"sta`+"\n"+whole+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	recs, cut, err := ReadAudit(cutLog)
	if err != nil || cut != 1 || len(recs) != 2 {
		t.Errorf("ReadAudit = %d records, %d cut, %v; want 2, 1, nil", len(recs), cut, err)
	}
	bad := filepath.Join(dir, "bad.jsonl")
	if err := os.WriteFile(bad, []byte(whole+"\n"+`{"tid":"x"}`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := ReadAudit(bad); err == nil {
		t.Error("a malformed, complete record was accepted")
	}
}

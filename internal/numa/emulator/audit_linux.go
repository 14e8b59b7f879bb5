// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build linux

package emulator

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/numapref/numapref/internal/numa"
)

// AuditRecord is one line of the emulator's opt-in audit log: a SET that succeeded, with
// the target task's identity and the cgroups it belonged to at that moment.
type AuditRecord struct {
	TID   int    `json:"tid"`
	TGID  int    `json:"tgid"`
	Start uint64 `json:"start"`
	NID   int    `json:"nid"`
	// Cgroup is /proc/<tid>/cgroup (one "id:controllers:path" entry a line), read right
	// after the SET. Empty when the task was exiting (the kernel shows an exiting task in
	// the root of every v1 hierarchy), had exited, or its id named another task: then Gone
	// is set and the record cannot be attributed to a cgroup.
	Cgroup []string `json:"cgroup,omitempty"`
	Gone   bool     `json:"gone,omitempty"`
}

// auditLog appends AuditRecords to a file opened with O_APPEND: each record is one
// write(2), so records of several processes sharing the file never interleave. A process
// killed by SIGKILL can still leave a record cut short (the kernel checks for fatal signals
// between the pages of a write), so each record starts with a newline as well as ending
// with one: a cut record stays a line of its own and never swallows the next.
type auditLog struct{ f *os.File }

// AuditTo makes the emulator append one JSON line (AuditRecord) to path for every SET it
// performs, from now on. It is meant for tests and demos that must prove where values
// went; the agent does not use it. Closing the emulator closes the log.
func (e *Emulator) AuditTo(path string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("emulator: opening audit log: %w", err)
	}
	e.closeMu.Lock()
	defer e.closeMu.Unlock()
	if e.closed {
		f.Close()
		return errClosed
	}
	if e.audit != nil {
		e.audit.f.Close()
	}
	e.audit = &auditLog{f: f}
	return nil
}

// pfExiting is the kernel's PF_EXITING task flag (/proc/<tid>/stat field 9).
const pfExiting = 0x4

// record logs a SET of nid on t. The cgroup file is read first and the task's stat after:
// the same start time and no PF_EXITING (a flag never cleared) prove that the cgroups read
// were the live task's own, the very task the SET named.
func (a *auditLog) record(procRoot string, t target, nid int) {
	r := AuditRecord{TID: t.task.TID, TGID: t.tgid(), Start: t.task.StartTime, NID: nid}
	data, err := numa.ReadTaskFile(procRoot, t.task.TID, "cgroup")
	stat, serr := numa.ReadTaskFile(procRoot, t.task.TID, "stat")
	if err != nil || serr != nil || !liveSince(string(stat), t.task.StartTime) {
		r.Gone = true
	} else {
		r.Cgroup = strings.Split(strings.TrimSpace(string(data)), "\n")
	}
	line, err := json.Marshal(r)
	if err != nil {
		return
	}
	// The SET is done either way; a record that cannot be written is missing from the log,
	// which is what a test reading it then sees.
	_, _ = a.f.Write(append(append([]byte{'\n'}, line...), '\n'))
}

// liveSince reports whether a /proc/<tid>/stat line is of a task started at start that is
// not exiting.
func liveSince(stat string, start uint64) bool {
	now, err := numa.ParseStatStartTime(stat)
	if err != nil || now != start {
		return false
	}
	i := strings.LastIndexByte(stat, ')')
	f := strings.Fields(stat[i+1:]) // f[0] is field 3 (state), f[6] field 9 (flags)
	if len(f) < 7 {
		return false
	}
	flags, err := strconv.ParseUint(f[6], 10, 64)
	return err == nil && flags&pfExiting == 0
}

func (a *auditLog) close() error { return a.f.Close() }

// ReadAudit parses an audit log written by AuditTo. cut counts the records a killed writer
// left incomplete (a line that is an unfinished record); any other malformed line is an
// error. Callers that never kill a writer expect cut to be 0.
func ReadAudit(path string) (recs []AuditRecord, cut int, err error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, 0, err
	}
	for i, line := range strings.Split(string(data), "\n") {
		if line == "" {
			continue
		}
		var r AuditRecord
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			if strings.HasPrefix(line, "{") && truncated(err) {
				cut++
				continue
			}
			return nil, 0, fmt.Errorf("audit log %s line %d: %w", path, i+1, err)
		}
		recs = append(recs, r)
	}
	return recs, cut, nil
}

// truncated reports whether a JSON decoding error means only that the input ended early.
func truncated(err error) bool {
	var syntax *json.SyntaxError
	return errors.As(err, &syntax) && syntax.Error() == "unexpected end of JSON input"
}

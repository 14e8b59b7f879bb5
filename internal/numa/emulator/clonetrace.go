// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package emulator

import (
	"strconv"
	"strings"
)

// Clone flags (include/uapi/linux/sched.h) the emulator reads from the task:task_newtask
// tracepoint.
const (
	cloneVM     = 0x00000100
	cloneThread = 0x00010000
)

// traceBirth is one task:task_newtask event: the kernel made task PID with clone flags
// Flags, on behalf of thread Creator (the event's common_pid: the thread that called
// clone(), which the proc connector's fork event does not name for a new thread).
type traceBirth struct {
	PID     int
	Creator int
	Flags   uint64
	CPU     int
	// TimeUs is the event's time on the trace clock in microseconds. The emulator's
	// instance uses the "mono" clock, CLOCK_MONOTONIC, the proc connector's clock.
	TimeUs uint64
}

// traceLine is what parseTraceLine found on one line of trace_pipe.
type traceLine int

const (
	traceLineOther traceLine = iota // another event, or a line it cannot parse
	traceLineBirth                  // a task_newtask event
	traceLineLost                   // "CPU:N [LOST M EVENTS]": the ring buffer of CPU N overflowed
)

const newtaskMarker = ": task_newtask: "

// parseTraceLine parses one line of a trace instance's trace_pipe, in the kernel's default
// text format:
//
//	<comm>-<pid>    [001] d..1.  1234.567890: task_newtask: pid=1235 comm=<comm> clone_flags=3d0f00 oom_score_adj=0
//
// The columns between the creator and the time depend on options (irq-info, record-tgid),
// and a comm may hold spaces, dashes and the names of fields; the parser relies only on
// what a comm (15 bytes at most) cannot forge: the 16-byte marker ": task_newtask: " is
// first found after the creator's comm, the time is the last column before it, the CPU the
// last "[NNN]" column, the creator's pid follows the last dash before that, and the event's
// own clone_flags field is the last one on the line, after the child's comm.
func parseTraceLine(line string) (traceBirth, traceLine) {
	if rest, ok := strings.CutPrefix(line, "CPU:"); ok {
		cpu, tail, ok := strings.Cut(rest, " ")
		n, err := strconv.Atoi(cpu)
		if ok && err == nil && strings.HasPrefix(tail, "[LOST ") {
			return traceBirth{CPU: n}, traceLineLost
		}
		return traceBirth{}, traceLineOther
	}
	i := strings.Index(line, newtaskMarker)
	if i < 0 {
		return traceBirth{}, traceLineOther
	}
	b, ok := parseTraceHeader(line[:i])
	if !ok {
		return traceBirth{}, traceLineOther
	}
	if b.PID, b.Flags, ok = parseNewtaskFields(line[i+len(newtaskMarker):]); !ok {
		return traceBirth{}, traceLineOther
	}
	return b, traceLineBirth
}

// parseTraceHeader reads the time, the CPU and the creator from what precedes the event's
// marker.
func parseTraceHeader(header string) (traceBirth, bool) {
	var b traceBirth
	// The time: the header's last column, seconds.microseconds.
	cut := strings.LastIndexByte(header, ' ')
	sec, usec, ok := strings.Cut(header[cut+1:], ".")
	s, err1 := strconv.ParseUint(sec, 10, 64)
	u, err2 := strconv.ParseUint(usec, 10, 64)
	if !ok || err1 != nil || err2 != nil || len(usec) != 6 {
		return traceBirth{}, false
	}
	b.TimeUs = s*1_000_000 + u
	header = header[:max(cut, 0)]
	// The CPU: the last "[NNN]" column; the creator is what comes before it.
	open := strings.LastIndex(header, " [")
	if open < 0 {
		return traceBirth{}, false
	}
	cpuCol, _, ok := strings.Cut(header[open+2:], "]")
	cpu, err := strconv.Atoi(cpuCol)
	if !ok || err != nil {
		return traceBirth{}, false
	}
	b.CPU = cpu
	creator := strings.TrimRight(header[:open], " ")
	if strings.HasSuffix(creator, ")") { // record-tgid: "comm-pid (tgid)"
		if j := strings.LastIndex(creator, "("); j >= 0 {
			creator = strings.TrimRight(creator[:j], " ")
		}
	}
	if dash := strings.LastIndexByte(creator, '-'); dash >= 0 {
		if pid, err := strconv.Atoi(creator[dash+1:]); err == nil && pid > 0 {
			b.Creator = pid
		}
	}
	return b, true
}

// parseNewtaskFields reads the child's pid (the first field) and clone_flags (the last but
// one, after the child's comm) from what follows the event's marker.
func parseNewtaskFields(fields string) (pid int, flags uint64, ok bool) {
	pidField, ok := strings.CutPrefix(fields, "pid=")
	if !ok {
		return 0, 0, false
	}
	pidText, _, _ := strings.Cut(pidField, " ")
	pid, err := strconv.Atoi(pidText)
	if err != nil || pid <= 0 {
		return 0, 0, false
	}
	j := strings.LastIndex(fields, " clone_flags=")
	if j < 0 {
		return 0, 0, false
	}
	flagsText, _, _ := strings.Cut(fields[j+len(" clone_flags="):], " ")
	flags, err = strconv.ParseUint(flagsText, 16, 64)
	if err != nil {
		return 0, 0, false
	}
	return pid, flags, true
}

// birthLog keeps recent task_newtask events by pid, so that the listener can find the one
// that matches a proc connector fork event: the first birth of that pid at or after the
// fork event's time (the tracepoint fires a few microseconds after the connector's event,
// both before the child first runs). It forgets births older than its horizon, counted
// back from the newest event it has seen.
type birthLog struct {
	byPID   map[int][]traceBirth // in order of birth
	queue   []traceBirth         // every kept birth in arrival order, for forgetting
	newest  uint64
	horizon uint64 // microseconds

	// lostUntil bounds the time of every event the ring buffer dropped so far: the time
	// the "[LOST N EVENTS]" line was read. Births up to then may be missing.
	lostUntil uint64
	lost      uint64 // LOST lines seen
	births    uint64 // births seen
}

func newBirthLog(horizonUs uint64) *birthLog {
	return &birthLog{byPID: map[int][]traceBirth{}, horizon: horizonUs}
}

// add records one parsed line, read at readUs (CLOCK_MONOTONIC microseconds).
func (l *birthLog) add(b traceBirth, kind traceLine, readUs uint64) {
	switch kind {
	case traceLineLost:
		l.lost++
		l.lostUntil = max(l.lostUntil, readUs)
		return
	case traceLineBirth:
	default:
		return
	}
	l.births++
	l.byPID[b.PID] = append(l.byPID[b.PID], b)
	l.queue = append(l.queue, b)
	l.newest = max(l.newest, b.TimeUs)
	l.forget()
}

func (l *birthLog) forget() {
	if l.newest < l.horizon {
		return
	}
	limit := l.newest - l.horizon
	n := 0
	for n < len(l.queue) && l.queue[n].TimeUs < limit {
		old := l.queue[n]
		if list := l.byPID[old.PID]; len(list) > 0 && list[0] == old {
			if len(list) == 1 {
				delete(l.byPID, old.PID)
			} else {
				l.byPID[old.PID] = list[1:]
			}
		}
		n++
	}
	if n > 0 {
		l.queue = append(l.queue[:0], l.queue[n:]...)
	}
}

// birthAnswer is what the log can say about a fork event.
type birthAnswer int

const (
	birthNotYet    birthAnswer = iota // no matching event yet: it may still come
	birthFound                        // the matching event
	birthUncertain                    // events were lost since the fork: no answer can be trusted
)

// slackUs allows for the trace clock ("mono", the NMI-safe fast accessor) reading a hair
// behind the connector's ktime_get_ns() around a timekeeping update.
const slackUs = 1000

// find returns the first birth of pid at or after sinceNs (CLOCK_MONOTONIC ns), the time of
// the proc connector's fork event.
func (l *birthLog) find(pid int, sinceNs uint64) (traceBirth, birthAnswer) {
	since := sinceNs / 1000
	since -= min(since, slackUs)
	if since <= l.lostUntil {
		// The birth, or an earlier birth of the same pid in the window, may have been lost.
		return traceBirth{}, birthUncertain
	}
	for _, b := range l.byPID[pid] {
		if b.TimeUs >= since {
			return b, birthFound
		}
	}
	return traceBirth{}, birthNotYet
}

// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bufio"
	"io"
	"regexp"
	"strings"
)

// A splat is one kernel report in the log: a WARNING, BUG, Oops, general protection
// fault, UBSAN report, INFO (hung task, RCU stall), or a bare Call Trace (a stack dump
// with no header the patterns know). Its body runs to the "---[ end trace" marker, the
// next splat, or the end of the log.
type splat struct {
	Kind   string   // "WARNING", "BUG", "INFO", "UBSAN", "Oops", "general protection", "Call Trace"
	Header string   // the line that started it
	Lines  []string // every line, the header first
	// Frames are the frames of its Call Trace, innermost first: function names without
	// offsets. The lab kernel has neither frame pointers nor ORC, so its unwinder guesses
	// and marks every frame "? "; the mark is dropped, the frame kept.
	Frames []string
}

// The known patch finding: the seed's prctl calls sched_setnuma() without updating the
// runqueue clock, so with SCHED_DEBUG a SET on a task queued on another CPU warns
// "rq->clock_update_flags < RQCF_ACT_SKIP" from assert_clock_updated. Only that WARNING,
// reached through prctl_chg_pref_nid, is waived.
const (
	knownWarning = "assert_clock_updated"
	knownMessage = "rq->clock_update_flags < RQCF_ACT_SKIP"
	knownCaller  = "prctl_chg_pref_nid"
)

var (
	// logPrefix is what run.sh's kmsg.log puts before each record: "[    2.345678] <4> ".
	logPrefix = regexp.MustCompile(`^\[\s*\d+\.\d+\] <\d> `)
	starts    = []struct {
		kind string
		re   *regexp.Regexp
	}{
		{"WARNING", regexp.MustCompile(`^WARNING: `)},
		{"BUG", regexp.MustCompile(`(^|: )BUG: |^kernel BUG at `)},
		{"UBSAN", regexp.MustCompile(`^UBSAN: `)},
		// Hung tasks ("INFO: task x:1 blocked for more than 120 seconds.") and RCU
		// stalls ("rcu: INFO: rcu_preempt self-detected stall on CPU").
		{"INFO", regexp.MustCompile(`(^|: )INFO: `)},
		{"Oops", regexp.MustCompile(`^Oops: `)},
		{"general protection", regexp.MustCompile(`general protection fault`)},
		{"Kernel panic", regexp.MustCompile(`^Kernel panic`)},
	}
	endMarker = "---[ end trace"
	cutHere   = "------------[ cut here ]------------"
	// frame is one Call Trace entry: " func+0x1a/0x40", " ? func+0x1a/0x40", with an
	// optional " [module]".
	frame = regexp.MustCompile(`^\s*(\? )?([A-Za-z0-9_.$]+)\+0x[0-9a-f]+/0x[0-9a-f]+`)
)

// parse splits a kmsg.log into its splats; lines outside any splat are ignored.
func parse(r io.Reader) ([]splat, error) {
	var out []splat
	var cur *splat
	inTrace := false
	flush := func() {
		if cur != nil {
			if cur.Kind == "" {
				cur.Kind = "cut here" // a report whose header no pattern knows
			}
			out = append(out, *cur)
		}
		cur, inTrace = nil, false
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := logPrefix.ReplaceAllString(sc.Text(), "")
		switch kind := startKind(line); {
		case strings.TrimSpace(line) == cutHere:
			// WARN() and BUG() open their report with it; the header follows.
			flush()
			cur = &splat{Header: line}
		case kind != "" && cur != nil && cur.Kind == "":
			cur.Kind, cur.Header = kind, line
		case kind != "":
			flush()
			cur = &splat{Kind: kind, Header: line}
		case strings.HasPrefix(strings.TrimSpace(line), "Call Trace:") && (cur == nil || inTraceDone(cur)):
			flush()
			cur = &splat{Kind: "Call Trace", Header: line}
		}
		if cur == nil {
			continue
		}
		cur.Lines = append(cur.Lines, line)
		if strings.HasPrefix(strings.TrimSpace(line), "Call Trace:") {
			inTrace = true
			continue
		}
		if inTrace {
			if m := frame.FindStringSubmatch(line); m != nil {
				cur.Frames = append(cur.Frames, m[2])
			}
		}
		if strings.HasPrefix(strings.TrimSpace(line), endMarker) {
			flush()
		}
	}
	flush()
	return out, sc.Err()
}

// inTraceDone reports whether cur already had its Call Trace, so another one is a new
// stack dump (a report with no end marker, followed by a second one).
func inTraceDone(cur *splat) bool {
	for _, l := range cur.Lines {
		if strings.TrimSpace(l) == "</TASK>" {
			return true
		}
	}
	return false
}

func startKind(line string) string {
	for _, s := range starts {
		if s.re.MatchString(line) {
			return s.kind
		}
	}
	return ""
}

// known reports whether s is the waived patch finding: a WARNING from
// assert_clock_updated (its header or its message) whose Call Trace passes through
// prctl_chg_pref_nid.
func known(s splat) bool {
	if s.Kind != "WARNING" {
		return false
	}
	mentions := strings.Contains(s.Header, knownWarning)
	for _, l := range s.Lines {
		mentions = mentions || strings.Contains(l, knownMessage)
	}
	if !mentions {
		return false
	}
	for _, f := range s.Frames {
		if f == knownCaller {
			return true
		}
	}
	return false
}

// backtrace names a splat's Call Trace for counting: its frames, innermost first.
func backtrace(s splat) string {
	if len(s.Frames) == 0 {
		return "(no frames)"
	}
	return strings.Join(s.Frames, " <- ")
}

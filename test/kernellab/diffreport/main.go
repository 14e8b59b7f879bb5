// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

// Command diffreport compares two conformance reports (the JSON lines that
// internal/testutil/conformance writes to $NUMAPREF_CONFORMANCE_REPORT): the suite
// run against the real PR_PREFERRED_NID prctl and the same suite run against the
// emulator, normally in one boot of the kernel lab's patched VM.
//
// It prints, case by case and call by call, whether the return value, the errno
// and the value stored at the pointer agree, then the observed values (sched
// lines, counts), and a total:
//
//	N/N calls agree (100%)
//
// Exit status: 0 when every call and observed value agrees and every case of
// either side is on the other; 1 on any disagreement, a case missing on one
// side, a case that failed or was skipped on one side only, or no call compared
// at all; 2 on a usage or read error.
//
// Usage:
//
//	diffreport [-accept-assumed-fresh] PRCTL.jsonl EMULATOR.jsonl
//
// -accept-assumed-fresh lets one kind of difference through without counting it
// as agreement: the emulator returned -1 where the kernel returned an inherited
// node, and the emulator's own record says it assumed that task fresh (its
// documented, counted limit). Such calls are listed as KNOWN and totalled apart.
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/numapref/numapref/internal/testutil/conformance"
)

// record is one case as the conformance suite reports it; call is one call in it.
type (
	record = conformance.CaseReport
	call   = conformance.CallResult
)

// report is one side: its cases in file order.
type report struct {
	name  string
	cases []record
	byKey map[string]record
}

func readReport(name string, r io.Reader) (*report, error) {
	rep := &report{name: name, byKey: map[string]record{}}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		var rec record
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			return nil, fmt.Errorf("%s line %d: %w", name, n, err)
		}
		if rec.Case == "" {
			return nil, fmt.Errorf("%s line %d: no case name", name, n)
		}
		if _, dup := rep.byKey[rec.Case]; dup {
			return nil, fmt.Errorf("%s line %d: case %s reported twice (one backend per file)", name, n, rec.Case)
		}
		rep.byKey[rec.Case] = rec
		rep.cases = append(rep.cases, rec)
	}
	return rep, sc.Err()
}

func readReportFile(path string) (*report, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readReport(path, f)
}

type options struct {
	acceptAssumedFresh bool
}

// summary is the outcome of a comparison.
type summary struct {
	Cases, CasesAgree       int
	Calls, CallsAgree       int
	KnownCalls              int // differences let through by -accept-assumed-fresh
	Observed, ObservedAgree int
	Problems                int // disagreements, missing cases, failed or one-sided skips
}

func (s summary) ok() bool { return s.Problems == 0 && s.Calls > 0 }

func percent(n, of int) string {
	if of == 0 {
		return "n/a"
	}
	p := float64(n) * 100 / float64(of)
	if n == of {
		return "100%"
	}
	return fmt.Sprintf("%.1f%%", p)
}

// compare writes the case-by-case comparison of a (the kernel) and b (the
// emulator) to w and returns the totals.
func compare(w io.Writer, a, b *report, opts options) summary { //nolint:funlen // test tooling: one table of the comparison, row by row
	var s summary
	fmt.Fprintf(w, "A = %s (%s)\nB = %s (%s)\n", a.name, backends(a), b.name, backends(b))
	var order []string
	for _, r := range a.cases {
		order = append(order, r.Case)
	}
	for _, r := range b.cases {
		if _, ok := a.byKey[r.Case]; !ok {
			order = append(order, r.Case)
		}
	}
	for _, name := range order {
		s.Cases++
		ra, okA := a.byKey[name]
		rb, okB := b.byKey[name]
		switch {
		case !okA || !okB:
			missing := "A"
			if okA {
				missing = "B"
			}
			fmt.Fprintf(w, "\ncase %s: MISSING in %s\n", name, missing)
			s.Problems++
			continue
		case ra.Skipped && rb.Skipped:
			fmt.Fprintf(w, "\ncase %s: skipped on both sides\n", name)
			s.CasesAgree++
			continue
		case ra.Skipped != rb.Skipped:
			fmt.Fprintf(w, "\ncase %s: DIFF skipped on %s only\n", name, map[bool]string{true: "A", false: "B"}[ra.Skipped])
			s.Problems++
			continue
		}
		cs := compareCase(w, ra, rb, opts)
		s.Calls += cs.Calls
		s.CallsAgree += cs.CallsAgree
		s.KnownCalls += cs.KnownCalls
		s.Observed += cs.Observed
		s.ObservedAgree += cs.ObservedAgree
		s.Problems += cs.Problems
		if cs.Problems == 0 && cs.KnownCalls == 0 {
			s.CasesAgree++
		}
	}
	fmt.Fprintf(w, "\n%d/%d cases agree (%s)\n", s.CasesAgree, s.Cases, percent(s.CasesAgree, s.Cases))
	fmt.Fprintf(w, "%d/%d calls agree (%s)\n", s.CallsAgree, s.Calls, percent(s.CallsAgree, s.Calls))
	if s.KnownCalls > 0 {
		fmt.Fprintf(w, "%d calls differ only because the emulator assumed a task fresh (documented, counted limit; accepted by -accept-assumed-fresh)\n", s.KnownCalls)
	}
	fmt.Fprintf(w, "%d/%d observed values agree (%s)\n", s.ObservedAgree, s.Observed, percent(s.ObservedAgree, s.Observed))
	switch {
	case s.Calls == 0:
		fmt.Fprintln(w, "RESULT: FAIL (no call compared)")
	case s.Problems > 0:
		fmt.Fprintf(w, "RESULT: FAIL (%d disagreements)\n", s.Problems)
	default:
		fmt.Fprintln(w, "RESULT: PASS")
	}
	return s
}

func backends(r *report) string {
	var names []string
	for _, c := range r.cases {
		if !slices.Contains(names, c.Backend) {
			names = append(names, c.Backend)
		}
	}
	if len(names) == 0 {
		return "empty"
	}
	return strings.Join(names, ",")
}

// keyed numbers repeated labels, so that calls pair up by label and occurrence.
func keyed(calls []call) ([]string, map[string]call) {
	seen := map[string]int{}
	m := map[string]call{}
	var keys []string
	for _, c := range calls {
		seen[c.Label]++
		k := c.Label
		if n := seen[c.Label]; n > 1 {
			k = fmt.Sprintf("%s#%d", c.Label, n)
		}
		keys = append(keys, k)
		m[k] = c
	}
	return keys, m
}

func compareCase(w io.Writer, ra, rb record, opts options) summary { //nolint:funlen // test tooling: one field of a case per comparison, in the report's order
	var s summary
	var body strings.Builder
	if !ra.Pass || !rb.Pass {
		fmt.Fprintf(&body, "  DIFF  case result: A %s, B %s\n", passWord(ra.Pass), passWord(rb.Pass))
		s.Problems++
	}
	keysA, callsA := keyed(ra.Calls)
	keysB, callsB := keyed(rb.Calls)
	order := keysA
	for _, k := range keysB {
		if _, ok := callsA[k]; !ok {
			order = append(order, k)
		}
	}
	for _, k := range order {
		s.Calls++
		ca, okA := callsA[k]
		cb, okB := callsB[k]
		switch {
		case !okA:
			fmt.Fprintf(&body, "  DIFF  %s: only in B (%s)\n", k, outcome(cb))
			s.Problems++
		case !okB:
			fmt.Fprintf(&body, "  DIFF  %s: only in A (%s)\n", k, outcome(ca))
			s.Problems++
		case ca.Cmd != cb.Cmd || ca.Target != cb.Target || ca.Nid != cb.Nid || ca.Ptr != cb.Ptr:
			fmt.Fprintf(&body, "  DIFF  %s: different calls: A cmd %d on %s nid %d ptr %s, B cmd %d on %s nid %d ptr %s\n",
				k, ca.Cmd, ca.Target, ca.Nid, ca.Ptr, cb.Cmd, cb.Target, cb.Nid, cb.Ptr)
			s.Problems++
		case ca.Ret == cb.Ret && ca.Errno == cb.Errno && ca.Stored == cb.Stored && ca.Value == cb.Value:
			fmt.Fprintf(&body, "  ok    %s: %s\n", k, outcome(ca))
			s.CallsAgree++
		case opts.acceptAssumedFresh && assumedFresh(ca, cb, rb.Notes):
			fmt.Fprintf(&body, "  KNOWN %s: A %s, B %s: the emulator assumed the task fresh (counted)\n", k, outcome(ca), outcome(cb))
			s.KnownCalls++
		default:
			fmt.Fprintf(&body, "  DIFF  %s: A %s, B %s\n", k, outcome(ca), outcome(cb))
			s.Problems++
		}
	}
	var obs []string
	for k := range ra.Observed {
		obs = append(obs, k)
	}
	for k := range rb.Observed {
		if _, ok := ra.Observed[k]; !ok {
			obs = append(obs, k)
		}
	}
	slices.Sort(obs)
	for _, k := range obs {
		s.Observed++
		va, okA := ra.Observed[k]
		vb, okB := rb.Observed[k]
		switch {
		case okA && okB && va == vb:
			fmt.Fprintf(&body, "  ok    observed %s = %d\n", k, va)
			s.ObservedAgree++
		default:
			fmt.Fprintf(&body, "  DIFF  observed %s: A %s, B %s\n", k, obsValue(va, okA), obsValue(vb, okB))
			s.Problems++
		}
	}
	verdict := "agree"
	switch {
	case s.Problems > 0:
		verdict = "DIFF"
	case s.KnownCalls > 0:
		verdict = "KNOWN difference"
	}
	fmt.Fprintf(w, "\ncase %s: %s (%d/%d calls, %d/%d observed)\n%s", ra.Case, verdict, s.CallsAgree, s.Calls, s.ObservedAgree, s.Observed, body.String())
	for _, n := range rb.Notes {
		fmt.Fprintf(w, "  note (B) %s\n", n)
	}
	for _, n := range ra.Notes {
		fmt.Fprintf(w, "  note (A) %s\n", n)
	}
	return s
}

// assumedFresh: the only difference is that B (the emulator) read -1 where A read
// a node, and B's notes say it assumed that call's task fresh.
func assumedFresh(ca, cb call, notes []string) bool {
	if ca.Ret != 0 || cb.Ret != 0 || ca.Errno != "" || cb.Errno != "" || !ca.Stored || !cb.Stored || cb.Value != -1 || ca.Value == -1 {
		return false
	}
	label := cb.Label
	if i := strings.LastIndex(label, ": "); i >= 0 {
		label = label[i+2:]
	}
	for _, n := range notes {
		if strings.HasPrefix(n, cb.Label+": -1,") || strings.HasPrefix(n, label+": -1,") {
			if strings.Contains(n, "assumed the task fresh") {
				return true
			}
		}
	}
	return false
}

func passWord(pass bool) string {
	if pass {
		return "pass"
	}
	return "FAIL"
}

func outcome(c call) string {
	errno := c.Errno
	if errno == "" {
		errno = "-"
	}
	v := "none"
	if c.Stored {
		v = fmt.Sprint(c.Value)
	}
	return fmt.Sprintf("ret %d errno %s value %s", c.Ret, errno, v)
}

func obsValue(v int, ok bool) string {
	if !ok {
		return "missing"
	}
	return fmt.Sprint(v)
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("diffreport", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var opts options
	fs.BoolVar(&opts.acceptAssumedFresh, "accept-assumed-fresh", false,
		"do not fail on calls where the emulator returned -1 for a task it says it assumed fresh")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: diffreport [-accept-assumed-fresh] PRCTL.jsonl EMULATOR.jsonl")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() != 2 {
		fs.Usage()
		return 2
	}
	a, errA := readReportFile(fs.Arg(0))
	b, errB := readReportFile(fs.Arg(1))
	if err := errors.Join(errA, errB); err != nil {
		fmt.Fprintf(stderr, "diffreport: %v\n", err)
		return 2
	}
	if !compare(stdout, a, b, opts).ok() {
		return 1
	}
	return 0
}

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

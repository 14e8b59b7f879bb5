// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

// Command kmsgcheck decides whether a kernel lab boot's kernel log (run.sh's kmsg.log:
// warnings and worse) is clean. Exactly one report is waived, and only on the patched
// kernel: the WARNING from assert_clock_updated reached through prctl_chg_pref_nid, a
// known finding about the seed patch (see classify.go). Every other report fails: any
// other WARNING, BUG, Oops, general protection fault, UBSAN report, INFO (an RCU stall
// or a hung task, with its Call Trace) or bare Call Trace.
//
//	kmsgcheck [-no-waiver] KMSG.log
//
// It prints one line per distinct backtrace, with its count, and a verdict line; it exits
// 0 when the log is clean or holds only the waived report, 1 otherwise, 2 on a usage or
// read error.
package main

import (
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
)

func main() {
	noWaiver := flag.Bool("no-waiver", false, "waive nothing (the control kernel has no prctl_chg_pref_nid)")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: kmsgcheck [-no-waiver] KMSG.log")
		os.Exit(2)
	}
	f, err := os.Open(flag.Arg(0))
	if err != nil {
		fmt.Fprintln(os.Stderr, "kmsgcheck:", err)
		os.Exit(2)
	}
	defer f.Close()
	ok, err := check(f, os.Stdout, !*noWaiver)
	if err != nil {
		fmt.Fprintln(os.Stderr, "kmsgcheck:", err)
		os.Exit(2)
	}
	if !ok {
		os.Exit(1)
	}
}

// verdict is the outcome for one log.
type verdict struct {
	Known, Other map[string]int // backtrace -> count
	OtherHeaders []string       // the first line of each failing report
}

// classify sorts a log's reports into the waived one and the rest.
func classify(r io.Reader, waive bool) (verdict, error) {
	splats, err := parse(r)
	if err != nil {
		return verdict{}, err
	}
	v := verdict{Known: map[string]int{}, Other: map[string]int{}}
	for _, s := range splats {
		if waive && known(s) {
			v.Known[backtrace(s)]++
			continue
		}
		v.Other[s.Kind+": "+backtrace(s)]++
		v.OtherHeaders = append(v.OtherHeaders, s.Header)
	}
	return v, nil
}

func check(r io.Reader, w io.Writer, waive bool) (bool, error) {
	v, err := classify(r, waive)
	if err != nil {
		return false, err
	}
	known := 0
	for _, bt := range slices.Sorted(maps.Keys(v.Known)) {
		fmt.Fprintf(w, "KNOWN %dx %s via %s: %s\n", v.Known[bt], knownWarning, knownCaller, bt)
		known += v.Known[bt]
	}
	for _, bt := range slices.Sorted(maps.Keys(v.Other)) {
		fmt.Fprintf(w, "FAIL  %dx %s\n", v.Other[bt], bt)
	}
	for _, h := range v.OtherHeaders {
		fmt.Fprintf(w, "      %s\n", h)
	}
	if len(v.Other) > 0 {
		fmt.Fprintf(w, "kernel log: FAIL: %d report(s) not waived, %d waived\n", len(v.OtherHeaders), known)
		return false, nil
	}
	fmt.Fprintf(w, "kernel log: ok: %d waived report(s) in %d backtrace(s), nothing else\n", known, len(v.Known))
	return true, nil
}

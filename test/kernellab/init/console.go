// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build linux

package main

import (
	"fmt"
	"strings"
)

// Markers frame what run.sh extracts from the serial console log. Each sits on
// a line of its own:
//
//	<<<KERNELLAB INIT kernel=6.12.117 uptime=1.52>>>
//	<<<KERNELLAB PLAN tests=smoke,conformance>>>
//	<<<KERNELLAB BEGIN-TEST name=smoke path=/kernellab/bin/smoke.test>>>
//	... the binary's stdout and stderr ...
//	<<<KERNELLAB END-TEST name=smoke status=pass exit=0 elapsed=0.41s>>>
//	<<<KERNELLAB BEGIN-REPORT name=smoke file=conformance.jsonl bytes=123>>>
//	... the file, verbatim ...
//	<<<KERNELLAB END-REPORT name=smoke file=conformance.jsonl>>>
//	<<<KERNELLAB BEGIN-KMSG>>> ... kernel warnings and worse ... <<<KERNELLAB END-KMSG>>>
//	<<<KERNELLAB SUMMARY tests=2 passed=2 failed=0>>>
//	<<<KERNELLAB POWEROFF uptime=9.87>>>
//
// Field values never contain blanks. A test's last line may lack a newline,
// so the END-TEST marker is looked for anywhere in a line.
const (
	markerOpen  = "<<<KERNELLAB "
	markerClose = ">>>"
)

// Marker kinds.
const (
	kindInit        = "INIT"
	kindPlan        = "PLAN"
	kindBeginTest   = "BEGIN-TEST"
	kindEndTest     = "END-TEST"
	kindBeginReport = "BEGIN-REPORT"
	kindEndReport   = "END-REPORT"
	kindBeginKmsg   = "BEGIN-KMSG"
	kindEndKmsg     = "END-KMSG"
	kindSummary     = "SUMMARY"
	kindPoweroff    = "POWEROFF"
)

// marker formats one marker line (without the newline). fields alternate
// keys and values.
func marker(kind string, fields ...string) string {
	var b strings.Builder
	b.WriteString(markerOpen)
	b.WriteString(kind)
	for i := 0; i+1 < len(fields); i += 2 {
		fmt.Fprintf(&b, " %s=%s", fields[i], fieldValue(fields[i+1]))
	}
	b.WriteString(markerClose)
	return b.String()
}

// fieldValue keeps a value on one word: blanks and the marker brackets would
// break the parsing in run.sh.
func fieldValue(v string) string {
	if v == "" {
		return "-"
	}
	return strings.Map(func(r rune) rune {
		switch r {
		case ' ', '\t', '\n', '\r', '<', '>':
			return '_'
		}
		return r
	}, v)
}

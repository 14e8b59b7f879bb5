// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A scenario sampled for less time by design is checked against its own length, and the
// pages the agent moved have their column.
func TestReportShortScenario(t *testing.T) {
	var samples []string
	for s := 1; s <= 30; s++ {
		samples = append(samples, fmt.Sprintf(`{"scenario":13,"t":%d,"source":"agent","locality":%.2f,"moved":%d,"workers":3}`,
			s, min(1, 0.5+float64(s)/20), 4096*min(s, 32)))
	}
	scen := writeLines(t, `{"id":13,"name":"migrate, policy A|B","command":"kubectl apply; policy A|B","seconds":30}`)
	results, err := load(writeLines(t, samples...), scen)
	if err != nil {
		t.Fatal(err)
	}
	if err := check(results, 60); err != nil {
		t.Errorf("check() = %v, want a 30 s scenario of 30 s of samples to pass", err)
	}
	var table bytes.Buffer
	writeTable(&table, results)
	if row := "| 13 | migrate, policy A\\|B | `kubectl apply; policy A\\|B` | 0.75 / 1.00 / 1.00 / – | 1.00 at 30 s | 0 / 0 MiB | 8 | 0 / 0 | 0 | 122880 | 0% of samples |"; !strings.Contains(table.String(), row) {
		t.Errorf("table lacks %q:\n%s", row, table.String())
	}
	results[0].samples = results[0].samples[:20]
	results[0].seconds = 20
	if err := check(results, 60); err == nil {
		t.Error("check() passed a 30 s scenario sampled for 20 s")
	}
}

func writeLines(t *testing.T, lines ...string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "f.jsonl")
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// Seconds to 90% is the first measured sample at or above 0.9; samples with an error do
// not count; too short a scenario fails the report.
func TestReport(t *testing.T) {
	var samples []string
	for s := 0; s <= 61; s++ {
		samples = append(samples, fmt.Sprintf(`{"scenario":4,"t":%d,"source":"agent","locality":%.2f,"node0MiB":%d,"node1MiB":%d,"faults":%d,"migrated":%d,"workers":2,"workersOnNode1":%d}`,
			s, min(1, float64(s)/40), 512-8*min(s, 64), 8*min(s, 64), 100*s, 50*s, s%2+1))
	}
	// Scenario 5 (the preference before the touch) is sampled a little late each second,
	// and its sample at 10 s has no metrics: the table's 10 s is then its neighbour at 9 s.
	for s := 0; s <= 61; s++ {
		if s == 10 {
			samples = append(samples, `{"scenario":5,"t":10.04,"source":"agent","err":"no series"}`)
			continue
		}
		samples = append(samples, fmt.Sprintf(`{"scenario":5,"t":%.2f,"source":"agent","locality":%.2f,"node0MiB":0,"node1MiB":512,"faults":10,"migrated":%d,"workers":3,"workersOnNode1":3}`,
			float64(s)+0.04, min(1, 0.1+float64(s)/20), 1000*s))
	}
	samples = append(samples, `{"scenario":1,"t":0,"source":"collector","err":"no series"}`,
		`{"scenario":1,"t":1,"source":"collector","locality":0.95,"workers":2}`)
	scen := writeLines(t, `{"id":1,"name":"one","command":"numapref tune-balancing -numa-balancing=0"}`,
		`{"id":5,"name":"five","command":"kubectl apply -f x.yaml before the pod"}`,
		`{"id":4,"name":"four","command":"kubectl apply -f x.yaml"}`)
	results, err := load(writeLines(t, samples...), scen)
	if err != nil {
		t.Fatal(err)
	}
	if len(results) != 3 || results[0].ID != 1 || results[1].ID != 4 || results[2].ID != 5 {
		t.Fatalf("results %+v, want scenarios 1, 4 and 5 in order", results)
	}
	if five := results[2]; five.to90 != 16.04 || five.unmeasured != 1 || five.final.Migrated != 61000 {
		t.Errorf("scenario 5: to90 %v unmeasured %d migrated %v; want 16.04, 1, 61000", five.to90, five.unmeasured, five.final.Migrated)
	}
	four := results[1]
	if four.to90 != 36 || four.final.Locality != 1 || four.peakFaults != 6100 || four.seconds != 61 {
		t.Errorf("scenario 4: to90 %v final %v peak faults %v seconds %v; want 36, 1, 6100, 61", four.to90, four.final.Locality, four.peakFaults, four.seconds)
	}
	if got := four.workerShare; got < 0.74 || got > 0.76 {
		t.Errorf("scenario 4: worker share %v, want 0.75 (1 or 2 of 2, alternating)", got)
	}
	if one := results[0]; one.unmeasured != 1 || one.to90 != 1 {
		t.Errorf("scenario 1: unmeasured %d, to90 %v; want 1 and 1", one.unmeasured, one.to90)
	}
	if err := check(results, 60); err == nil || !strings.Contains(err.Error(), "scenario 1 (one)") || strings.Contains(err.Error(), "scenario 4") {
		t.Errorf("check() = %v, want only scenario 1 too short", err)
	}
	var table, svg bytes.Buffer
	writeTable(&table, results)
	for _, row := range []string{
		"| locality (node 1) at 5 / 10 / 30 / 90 s | final locality (node 1) |",
		"| 1 | one | `numapref tune-balancing -numa-balancing=0` | – / – / – / – | 0.95 at 1 s |",
		"| 4 | four | `kubectl apply -f x.yaml` | 0.12 / 0.25 / 0.75 / – | 1.00 at 61 s | 24 / 488 MiB | 36 |",
		"| 5 | five | `kubectl apply -f x.yaml before the pod` | 0.35 / 0.55 / 1.00 / – | 1.00 at 61 s | 0 / 512 MiB | 16 | 10 / 10 | 61000 | 0 | 100% of samples |",
	} {
		if !strings.Contains(table.String(), row) {
			t.Errorf("table lacks %q:\n%s", row, table.String())
		}
	}
	writeSVG(&svg, results)
	if n := strings.Count(svg.String(), "<polyline"); n != 3 || !strings.HasSuffix(svg.String(), "</svg>\n") {
		t.Errorf("svg has %d polylines, want 3 and a closed document", n)
	}
	// Each scenario keeps its own line whichever others are drawn: 4 solid green, 5
	// dashed red, each with its legend entry.
	for id, want := range map[int]string{
		4: `<polyline fill="none" stroke="#2ca02c" stroke-width="2.5" stroke-dasharray="" points="60.0,`,
		5: `<polyline fill="none" stroke="#d62728" stroke-width="2.5" stroke-dasharray="4 2" points="60.2,`,
	} {
		if !strings.Contains(svg.String(), want) {
			t.Errorf("svg lacks scenario %d's line %q", id, want)
		}
		if legend := fmt.Sprintf(">%d: %s<", id, map[int]string{4: "four", 5: "five"}[id]); !strings.Contains(svg.String(), legend) {
			t.Errorf("svg lacks scenario %d's legend %q", id, legend)
		}
	}
	if n := strings.Count(svg.String(), `stroke="#d62728"`); n != 2 {
		t.Errorf("scenario 5's colour appears %d times, want 2 (its line and its legend)", n)
	}
}

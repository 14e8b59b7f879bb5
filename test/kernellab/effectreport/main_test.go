package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

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
	samples = append(samples, `{"scenario":1,"t":0,"source":"collector","err":"no series"}`,
		`{"scenario":1,"t":1,"source":"collector","locality":0.95,"workers":2}`)
	scen := writeLines(t, `{"id":1,"name":"one","command":"numapref tune-balancing -numa-balancing=0"}`,
		`{"id":4,"name":"four","command":"kubectl apply -f x.yaml"}`)
	results, err := load(writeLines(t, samples...), scen)
	if err != nil {
		t.Fatal(err)
	}
	if len(results) != 2 || results[0].ID != 1 || results[1].ID != 4 {
		t.Fatalf("results %+v, want scenarios 1 and 4 in order", results)
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
	if !strings.Contains(table.String(), "| 4 | four | `kubectl apply -f x.yaml` | 1.00 at 61 s | 24 / 488 MiB | 36 |") {
		t.Errorf("table row of scenario 4 missing:\n%s", table.String())
	}
	writeSVG(&svg, results)
	if n := strings.Count(svg.String(), "<polyline"); n != 2 || !strings.HasSuffix(svg.String(), "</svg>\n") {
		t.Errorf("svg has %d polylines, want 2 and a closed document", n)
	}
}

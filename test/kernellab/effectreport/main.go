// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

// Command effectreport turns the kernel lab's effect experiment (test/kernellab/agent
// TestEffect: effect.jsonl, one sample per scenario and second, and effect-scenarios.jsonl,
// each scenario's commands) into the table BENCHMARKS.md shows and a picture of memory
// locality over time, one line per scenario.
//
//	effectreport -svg OUT.svg EFFECT.jsonl SCENARIOS.jsonl   prints the table (Markdown)
//
// It fails when a scenario has no samples or fewer than -min-seconds of them.
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strings"
)

// sample is one line of effect.jsonl (see test/kernellab/agent/effect_test.go).
type sample struct {
	Scenario       int     `json:"scenario"`
	T              float64 `json:"t"`
	Source         string  `json:"source"`
	Locality       float64 `json:"locality"`
	Node0MiB       float64 `json:"node0MiB"`
	Node1MiB       float64 `json:"node1MiB"`
	Faults         float64 `json:"faults"`
	Migrated       float64 `json:"migrated"`
	Workers        int     `json:"workers"`
	WorkersOnNode1 int     `json:"workersOnNode1"`
	// Moved counts the pages the agent's page migration moved (numapref_migrated_pages_total).
	Moved float64 `json:"moved"`
	Err   string  `json:"err"`
}

// scenario is one line of effect-scenarios.jsonl. Seconds is how long it was to be
// sampled (0: -min-seconds applies).
type scenario struct {
	ID      int     `json:"id"`
	Name    string  `json:"name"`
	Command string  `json:"command"`
	Seconds float64 `json:"seconds"`
}

// result is one row of the table.
type result struct {
	scenario
	samples      []sample // measured ones, in time order
	seconds      float64  // last sample's time
	final        sample
	to90         float64 // first time locality >= 0.9; -1 if never
	peakFaults   float64
	workerShare  float64 // share of worker samples with current_node=1
	source       string
	unmeasured   int // samples without every metric
	workersTotal int
}

func main() {
	svg := flag.String("svg", "", "write the locality picture here")
	minSeconds := flag.Float64("min-seconds", 60, "fail when a scenario was sampled for less than this")
	flag.Parse()
	if flag.NArg() != 2 {
		fmt.Fprintln(os.Stderr, "usage: effectreport [-svg OUT.svg] EFFECT.jsonl SCENARIOS.jsonl")
		os.Exit(2)
	}
	results, err := load(flag.Arg(0), flag.Arg(1))
	if err == nil {
		err = check(results, *minSeconds)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "effectreport:", err)
		os.Exit(1)
	}
	writeTable(os.Stdout, results)
	if *svg != "" {
		f, err := os.Create(*svg)
		if err == nil {
			writeSVG(f, results)
			err = f.Close()
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "effectreport:", err)
			os.Exit(1)
		}
	}
}

func load(samplesPath, scenariosPath string) ([]result, error) {
	var scenarios []scenario
	if err := readLines(scenariosPath, func(line []byte) error {
		var s scenario
		if err := json.Unmarshal(line, &s); err != nil {
			return err
		}
		scenarios = append(scenarios, s)
		return nil
	}); err != nil {
		return nil, err
	}
	byID := map[int]*result{}
	var results []result
	for _, s := range scenarios {
		results = append(results, result{scenario: s, to90: -1})
	}
	for i := range results {
		byID[results[i].ID] = &results[i]
	}
	if err := readLines(samplesPath, func(line []byte) error {
		var s sample
		if err := json.Unmarshal(line, &s); err != nil {
			return err
		}
		r, ok := byID[s.Scenario]
		if !ok {
			return fmt.Errorf("sample of scenario %d, which effect-scenarios does not list", s.Scenario)
		}
		r.add(s)
		return nil
	}); err != nil {
		return nil, err
	}
	slices.SortFunc(results, func(a, b result) int { return a.ID - b.ID })
	return results, nil
}

func (r *result) add(s sample) {
	if s.Err != "" {
		r.unmeasured++
		return
	}
	r.samples = append(r.samples, s)
	r.final, r.seconds, r.source = s, s.T, s.Source
	r.peakFaults = max(r.peakFaults, s.Faults)
	if r.to90 < 0 && s.Locality >= 0.9 {
		r.to90 = s.T
	}
	r.workersTotal += s.Workers
	if r.workersTotal > 0 {
		var on1 int
		for _, x := range r.samples {
			on1 += x.WorkersOnNode1
		}
		r.workerShare = float64(on1) / float64(r.workersTotal)
	}
}

func check(results []result, minSeconds float64) error {
	if len(results) == 0 {
		return errors.New("no scenarios")
	}
	var errs []error
	for _, r := range results {
		want := minSeconds
		if r.Seconds > 0 {
			want = min(minSeconds, r.Seconds-2) // the sampler's first and last second may be unmeasured
		}
		if len(r.samples) == 0 || r.seconds < want {
			errs = append(errs, fmt.Errorf("scenario %d (%s): %d measured samples over %.0f s, want at least %.0f s",
				r.ID, r.Name, len(r.samples), r.seconds, want))
		}
	}
	return errors.Join(errs...)
}

func readLines(path string, f func([]byte) error) error {
	file, err := os.Open(path)
	if err != nil {
		return err
	}
	defer file.Close()
	sc := bufio.NewScanner(file)
	for n := 1; sc.Scan(); n++ {
		if len(strings.TrimSpace(sc.Text())) == 0 {
			continue
		}
		if err := f(sc.Bytes()); err != nil {
			return fmt.Errorf("%s:%d: %w", path, n, err)
		}
	}
	return sc.Err()
}

// checkpoints are the times the table shows each scenario's locality at (how much
// sooner memory is local when the preference comes before the touch).
var checkpoints = []float64{5, 10, 30, 90}

// at is the measured sample nearest to t seconds, if one is within a second of it (the
// sampler ticks every second, and drops ticks when a scrape takes longer).
func (r *result) at(t float64) (sample, bool) {
	var best sample
	found := false
	for _, s := range r.samples {
		if d := math.Abs(s.T - t); d <= 1 && (!found || d < math.Abs(best.T-t)) {
			best, found = s, true
		}
	}
	return best, found
}

// writeTable prints one Markdown row per scenario.
func writeTable(w io.Writer, results []result) {
	var at []string
	for _, c := range checkpoints {
		at = append(at, fmt.Sprintf("%.0f", c))
	}
	fmt.Fprintf(w, "| # | scenario | command | locality (node 1) at %s s | final locality (node 1) | memory node 0 / node 1 | s to 90%% on node 1 | hinting faults (peak / final) | pages migrated by balancing | pages moved by the agent | streaming threads on node 1 | source |\n",
		strings.Join(at, " / "))
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|---|---|")
	for _, r := range results {
		to90 := fmt.Sprintf("%.0f", r.to90)
		if r.to90 < 0 {
			to90 = fmt.Sprintf("not in %.0f s", r.seconds)
		}
		var localities []string
		for _, c := range checkpoints {
			if s, ok := r.at(c); ok {
				localities = append(localities, fmt.Sprintf("%.2f", s.Locality))
			} else {
				localities = append(localities, "–")
			}
		}
		fmt.Fprintf(w, "| %d | %s | `%s` | %s | %.2f at %.0f s | %.0f / %.0f MiB | %s | %.0f / %.0f | %.0f | %.0f | %.0f%% of samples | %s |\n",
			r.ID, cell(r.Name), cell(r.Command), strings.Join(localities, " / "), r.final.Locality, r.seconds, r.final.Node0MiB, r.final.Node1MiB, to90,
			r.peakFaults, r.final.Faults, r.final.Migrated, r.final.Moved, 100*r.workerShare, sourceName(r.source))
	}
}

// cell escapes the pipes of a table cell's text (a policy's flags: MPOL_PREFERRED_MANY|
// MPOL_F_NUMA_BALANCING), which would end the cell, in a code span too.
func cell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

func sourceName(s string) string {
	if s == "agent" {
		return "agent's /metrics"
	}
	return "agent's collector in the lab (agent selects nothing)"
}

// The picture: locality on node 1 (0..1) against seconds, one polyline per scenario.
const (
	svgW, svgH                       = 720, 420
	plotL, plotR, plotT, plotB       = 60, 250, 30, 50 // margins
	axisColor, gridColor, labelColor = "#333", "#ddd", "#222"
)

// A scenario's line style follows its ID, so scenario 4 looks the same in a picture of all
// five and in one of 4 and 5 alone.
var (
	lineColors = []string{"#7f7f7f", "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd"}
	// Dashes keep lines that lie on top of each other (1 and 3 both stay near 0) apart.
	lineDashes = []string{"2 4", "", "9 4", "", "4 2", ""}
)

func lineStyle(id int) (color, dash string) {
	i := ((id-1)%len(lineColors) + len(lineColors)) % len(lineColors)
	return lineColors[i], lineDashes[i]
}

func writeSVG(w io.Writer, results []result) {
	tMax := 0.0
	for _, r := range results {
		tMax = max(tMax, r.seconds)
	}
	tMax = max(10, 10*math.Ceil((tMax-0.5)/10)) // 60.3 s of samples: an axis to 60
	pw, ph := float64(svgW-plotL-plotR), float64(svgH-plotT-plotB)
	x := func(t float64) float64 { return plotL + pw*t/tMax }
	y := func(v float64) float64 { return plotT + ph*(1-v) }
	fmt.Fprintf(w, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", svgW, svgH, svgW, svgH)
	fmt.Fprintf(w, `<rect width="%d" height="%d" fill="white"/>`+"\n", svgW, svgH)
	fmt.Fprintf(w, `<text x="%d" y="18" font-size="14" fill="%s">Memory on the preferred node (1) over time, kernel lab (qemu TCG, 2 nodes)</text>`+"\n", plotL, labelColor)
	for v := 0.0; v <= 1.0001; v += 0.25 {
		fmt.Fprintf(w, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s"/>`+"\n", x(0), y(v), x(tMax), y(v), gridColor)
		fmt.Fprintf(w, `<text x="%.1f" y="%.1f" text-anchor="end" fill="%s">%.2f</text>`+"\n", x(0)-6, y(v)+4, labelColor, v)
	}
	for t := 0.0; t <= tMax+0.001; t += 10 {
		fmt.Fprintf(w, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s"/>`+"\n", x(t), y(0), x(t), y(1), gridColor)
		fmt.Fprintf(w, `<text x="%.1f" y="%.1f" text-anchor="middle" fill="%s">%.0f</text>`+"\n", x(t), y(0)+16, labelColor, t)
	}
	fmt.Fprintf(w, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-dasharray="4 3"/>`+"\n", x(0), y(0.9), x(tMax), y(0.9), axisColor)
	fmt.Fprintf(w, `<text x="%.1f" y="%.1f" text-anchor="end" fill="%s">90%%</text>`+"\n", x(tMax)-2, y(0.9)-4, labelColor)
	fmt.Fprintf(w, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="none" stroke="%s"/>`+"\n", x(0), y(1), pw, ph, axisColor)
	fmt.Fprintf(w, `<text x="%.1f" y="%d" text-anchor="middle" fill="%s">seconds since the memory was first touched on node 0</text>`+"\n", x(tMax/2), svgH-12, labelColor)
	fmt.Fprintf(w, `<text transform="translate(16 %.1f) rotate(-90)" text-anchor="middle" fill="%s">locality ratio (share on node 1)</text>`+"\n", y(0.5), labelColor)
	for i, r := range results {
		color, dash := lineStyle(r.ID)
		var pts []string
		for _, s := range r.samples {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(s.T), y(s.Locality)))
		}
		fmt.Fprintf(w, `<polyline fill="none" stroke="%s" stroke-width="2.5" stroke-dasharray="%s" points="%s"/>`+"\n", color, dash, strings.Join(pts, " "))
		ly := float64(plotT + 20 + 44*i)
		lx := float64(svgW - plotR + 16)
		fmt.Fprintf(w, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="3" stroke-dasharray="%s"/>`+"\n", lx, ly, lx+22, ly, color, dash)
		for j, part := range wrap(fmt.Sprintf("%d: %s", r.ID, r.Name), 30) {
			fmt.Fprintf(w, `<text x="%.1f" y="%.1f" fill="%s">%s</text>`+"\n", lx+28, ly+4+14*float64(j), labelColor, escape(part))
		}
	}
	fmt.Fprintln(w, "</svg>")
}

// wrap splits s into lines of at most n characters at blanks.
func wrap(s string, n int) []string {
	var lines []string
	line := ""
	for _, word := range strings.Fields(s) {
		if line != "" && len(line)+1+len(word) > n {
			lines = append(lines, line)
			line = ""
		}
		if line != "" {
			line += " "
		}
		line += word
	}
	return append(lines, line)
}

func escape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

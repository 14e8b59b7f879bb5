// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package plot

import (
	"bytes"
	"image"
	"image/png"
	"math"
	"testing"
	"time"
)

func TestRenderDrawsEachSeriesInItsColor(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 1, 0, 0, 0, time.UTC)
	ramp := Series{Name: "ramp"}
	flat := Series{Name: "flat"}
	for i := 0; i < 60; i++ {
		at := t0.Add(time.Duration(i) * 2 * time.Second)
		ramp.Points = append(ramp.Points, Point{T: at, V: float64(i) * 1024 * 1024})
		flat.Points = append(flat.Points, Point{T: at, V: 5 * 1024 * 1024})
	}
	// Prometheus answers NaN for a quantile of no samples: such points break the line.
	gaps := Series{Name: "gaps"}
	for i := 0; i < 60; i++ {
		v := float64(i % 7)
		if i%5 == 0 {
			v = math.NaN()
		}
		if i == 31 {
			v = math.Inf(1)
		}
		gaps.Points = append(gaps.Points, Point{T: t0.Add(time.Duration(i) * 2 * time.Second), V: v})
	}
	panels := []Panel{
		{Title: "memory", Unit: Bytes, Series: []Series{ramp, flat}},
		{Title: "gaps", Unit: Seconds, Series: []Series{gaps}},
		{Title: "empty", Unit: Ratio},
		{Title: "nan only", Series: []Series{{Name: "x", Points: []Point{{T: t0, V: math.NaN()}}}}},
	}
	var buf bytes.Buffer
	if err := Render(&buf, "heading", panels, 2); err != nil {
		t.Fatalf("Render: %v", err)
	}
	img, err := png.Decode(&buf)
	if err != nil {
		t.Fatalf("decoding the PNG: %v", err)
	}
	if got, want := img.Bounds().Size(), image.Pt(2*panelW, titleH+margin+2*panelH); got != want {
		t.Errorf("size %v, want %v", got, want)
	}
	// Both lines of the first panel are drawn: count each color's pixels inside it.
	first := image.Rect(0, titleH+margin, panelW, titleH+margin+panelH)
	for i, s := range panels[0].Series {
		if n := pixels(img, first, Color(i)); n < 200 {
			t.Errorf("series %q: %d pixels of its color in the panel, want a line (≥ 200)", s.Name, n)
		}
	}
	second := image.Rect(panelW, titleH+margin, 2*panelW, titleH+margin+panelH)
	if n := pixels(img, second, Color(0)); n < 100 {
		t.Errorf("the series with gaps: %d pixels of its color, want its segments (≥ 100)", n)
	}
	// The empty panel draws no line.
	third := image.Rect(0, titleH+margin+panelH, panelW, titleH+margin+2*panelH)
	if n := pixels(img, third, Color(0)); n != 0 {
		t.Errorf("the empty panel has %d pixels of a line's color", n)
	}
}

func TestRenderRefusesNothing(t *testing.T) {
	if err := Render(&bytes.Buffer{}, "x", nil, 2); err == nil {
		t.Error("Render of no panels succeeded")
	}
}

func TestFormat(t *testing.T) {
	for in, want := range map[struct {
		v float64
		u Unit
	}]string{
		{0, Plain}:                      "0",
		{1500, Plain}:                   "1.5k",
		{50 * 1024 * 1024, Bytes}:       "50MiB",
		{0.0042, Seconds}:               "4.2ms",
		{0.00005, Seconds}:              "50µs",
		{0.25, Ratio}:                   "25%",
		{2500, PerSecond}:               "2.5k/s",
		{3 * 1024 * 1024 * 1024, Bytes}: "3GiB",
	} {
		if got := format(in.v, in.u); got != want {
			t.Errorf("format(%v, %v) = %q, want %q", in.v, in.u, got, want)
		}
	}
}

func pixels(img image.Image, r image.Rectangle, c interface{ RGBA() (r, g, b, a uint32) }) int {
	cr, cg, cb, _ := c.RGBA()
	n := 0
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			pr, pg, pb, _ := img.At(x, y).RGBA()
			if pr == cr && pg == cg && pb == cb {
				n++
			}
		}
	}
	return n
}

// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

// Package plot draws time series panels into a PNG: the dashboard picture the monitoring
// e2e makes from a real Prometheus' query_range answers (docs/operate/monitoring.md). It needs no
// browser and no network, so the picture is the same wherever the spec runs.
package plot

import (
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"io"
	"math"
	"time"

	"golang.org/x/image/font"
	"golang.org/x/image/font/basicfont"
	"golang.org/x/image/math/fixed"
)

// Point is one sample of a series.
type Point struct {
	T time.Time
	V float64
}

// Series is one line of a panel.
type Series struct {
	Name   string
	Points []Point
}

// Panel is one graph: a title, the unit of its values and its lines.
type Panel struct {
	Title  string
	Unit   Unit
	Series []Series
}

// Unit says how a panel labels its values.
type Unit int

const (
	// Plain values, with k/M suffixes.
	Plain Unit = iota
	// Bytes, in KiB/MiB/GiB.
	Bytes
	// Seconds, in µs/ms/s.
	Seconds
	// PerSecond, a rate.
	PerSecond
	// Ratio, 0..1 shown as a percentage.
	Ratio
)

// Layout of a panel, in pixels.
const (
	panelW    = 560
	panelH    = 250
	margin    = 12
	titleH    = 18
	axisW     = 70
	axisH     = 16
	legendH   = 44
	maxLegend = 6
)

var (
	background = color.RGBA{0xff, 0xff, 0xff, 0xff}
	frame      = color.RGBA{0xc8, 0xc8, 0xc8, 0xff}
	grid       = color.RGBA{0xee, 0xee, 0xee, 0xff}
	ink        = color.RGBA{0x20, 0x20, 0x20, 0xff}
	faint      = color.RGBA{0x80, 0x80, 0x80, 0xff}
	palette    = []color.RGBA{
		{0x1f, 0x77, 0xb4, 0xff}, {0xd6, 0x27, 0x28, 0xff}, {0x2c, 0xa0, 0x2c, 0xff},
		{0xff, 0x7f, 0x0e, 0xff}, {0x94, 0x67, 0xbd, 0xff}, {0x8c, 0x56, 0x4b, 0xff},
	}
)

// Color is the color of a panel's series number i.
func Color(i int) color.RGBA { return palette[i%len(palette)] }

// Render draws the panels, cols per row, under a heading, and writes a PNG to w.
func Render(w io.Writer, heading string, panels []Panel, cols int) error {
	if len(panels) == 0 || cols < 1 {
		return errors.New("plot: nothing to draw")
	}
	rows := (len(panels) + cols - 1) / cols
	img := image.NewRGBA(image.Rect(0, 0, cols*panelW, titleH+margin+rows*panelH))
	draw.Draw(img, img.Bounds(), image.NewUniform(background), image.Point{}, draw.Src)
	text(img, margin, titleH, heading, ink)
	for i, p := range panels {
		origin := image.Pt((i%cols)*panelW, titleH+margin+(i/cols)*panelH)
		drawPanel(img, image.Rectangle{Min: origin, Max: origin.Add(image.Pt(panelW, panelH))}, p)
	}
	return png.Encode(w, img)
}

// drawPanel draws one panel into r: title, frame, axes, lines and legend.
func drawPanel(img *image.RGBA, r image.Rectangle, p Panel) {
	r = r.Inset(margin / 2)
	rectangle(img, r, frame)
	text(img, r.Min.X+6, r.Min.Y+14, p.Title, ink)
	plotArea := image.Rect(r.Min.X+axisW, r.Min.Y+titleH+6, r.Max.X-10, r.Max.Y-legendH-axisH)
	t0, t1, lo, hi, ok := bounds(p.Series)
	if !ok {
		text(img, plotArea.Min.X+10, plotArea.Min.Y+30, "no data", faint)
		return
	}
	for i := 0; i <= 4; i++ {
		y := plotArea.Max.Y - i*plotArea.Dy()/4
		hline(img, plotArea.Min.X, plotArea.Max.X, y, grid)
		label := format(lo+(hi-lo)*float64(i)/4, p.Unit)
		text(img, plotArea.Min.X-6-width(label), y+4, label, faint)
	}
	rectangle(img, plotArea, frame)
	text(img, plotArea.Min.X, plotArea.Max.Y+13, t0.UTC().Format("15:04:05"), faint)
	end := t1.UTC().Format("15:04:05 UTC")
	text(img, plotArea.Max.X-width(end), plotArea.Max.Y+13, end, faint)
	x := func(t time.Time) int {
		return plotArea.Min.X + int(float64(plotArea.Dx())*float64(t.Sub(t0))/float64(t1.Sub(t0)))
	}
	y := func(v float64) int {
		return plotArea.Max.Y - int(float64(plotArea.Dy())*(v-lo)/(hi-lo))
	}
	for i, s := range p.Series {
		c := Color(i)
		// A value that is not a number (a quantile of no samples) breaks the line.
		var prev *Point
		for j := range s.Points {
			pt := &s.Points[j]
			if !finite(pt.V) {
				prev = nil
				continue
			}
			if prev != nil {
				line(img, x(prev.T), y(prev.V), x(pt.T), y(pt.V), c)
			} else {
				dot(img, x(pt.T), y(pt.V), c)
			}
			prev = pt
		}
	}
	legend(img, image.Pt(r.Min.X+10, plotArea.Max.Y+axisH+12), r.Dx()-20, p.Series)
}

// legend writes the series' names in their colors, two per line.
func legend(img *image.RGBA, at image.Point, w int, series []Series) {
	for i, s := range series {
		if i == maxLegend {
			text(img, at.X, at.Y+(i/2)*13, fmt.Sprintf("… and %d more", len(series)-maxLegend), faint)
			return
		}
		x, y := at.X+(i%2)*(w/2), at.Y+(i/2)*13
		c := Color(i)
		draw.Draw(img, image.Rect(x, y-7, x+14, y-3), image.NewUniform(c), image.Point{}, draw.Src)
		name := s.Name
		if max := (w/2 - 24) / 7; len(name) > max {
			name = name[:max-1] + "…"
		}
		text(img, x+18, y, name, ink)
	}
}

// bounds is the time span and value range of the series; the range starts at 0 for
// non-negative data and is never empty.
func bounds(series []Series) (t0, t1 time.Time, lo, hi float64, ok bool) {
	lo, hi = math.Inf(1), math.Inf(-1)
	for _, s := range series {
		for _, pt := range s.Points {
			if !finite(pt.V) {
				continue
			}
			if !ok || pt.T.Before(t0) {
				t0 = pt.T
			}
			if !ok || pt.T.After(t1) {
				t1 = pt.T
			}
			lo, hi, ok = math.Min(lo, pt.V), math.Max(hi, pt.V), true
		}
	}
	if !ok {
		return t0, t1, 0, 0, false
	}
	if lo > 0 {
		lo = 0
	}
	if hi <= lo {
		hi = lo + 1
	}
	hi += (hi - lo) * 0.05
	if !t1.After(t0) {
		t1 = t0.Add(time.Second)
	}
	return t0, t1, lo, hi, true
}

// format writes v in the panel's unit.
func format(v float64, u Unit) string {
	switch u {
	case Bytes:
		return scaled(v, 1024, []string{"B", "KiB", "MiB", "GiB", "TiB"})
	case Seconds:
		switch a := math.Abs(v); {
		case a == 0:
			return "0"
		case a < 1e-3:
			return fmt.Sprintf("%.0fµs", v*1e6)
		case a < 1:
			return fmt.Sprintf("%.1fms", v*1e3)
		}
		return fmt.Sprintf("%.2fs", v)
	case PerSecond:
		return scaled(v, 1000, []string{"/s", "k/s", "M/s"})
	case Ratio:
		return fmt.Sprintf("%.0f%%", v*100)
	}
	return scaled(v, 1000, []string{"", "k", "M", "G"})
}

// scaled writes v with the largest suffix that keeps it ≥ 1.
func scaled(v, base float64, suffixes []string) string {
	i := 0
	for math.Abs(v) >= base && i < len(suffixes)-1 {
		v /= base
		i++
	}
	switch a := math.Abs(v); {
	case v == math.Trunc(v) || a >= 100:
		return fmt.Sprintf("%.0f%s", v, suffixes[i])
	case a >= 10:
		return fmt.Sprintf("%.1f%s", v, suffixes[i])
	}
	return fmt.Sprintf("%.2g%s", v, suffixes[i])
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

func text(img *image.RGBA, x, y int, s string, c color.Color) {
	d := font.Drawer{Dst: img, Src: image.NewUniform(c), Face: basicfont.Face7x13, Dot: fixed.P(x, y)}
	d.DrawString(s)
}

func width(s string) int { return font.MeasureString(basicfont.Face7x13, s).Round() }

func hline(img *image.RGBA, x0, x1, y int, c color.Color) {
	for x := x0; x <= x1; x++ {
		img.Set(x, y, c)
	}
}

func rectangle(img *image.RGBA, r image.Rectangle, c color.Color) {
	hline(img, r.Min.X, r.Max.X, r.Min.Y, c)
	hline(img, r.Min.X, r.Max.X, r.Max.Y, c)
	for y := r.Min.Y; y <= r.Max.Y; y++ {
		img.Set(r.Min.X, y, c)
		img.Set(r.Max.X, y, c)
	}
}

// line draws a two-pixel-wide segment (Bresenham).
func line(img *image.RGBA, x0, y0, x1, y1 int, c color.Color) {
	dx, dy := abs(x1-x0), -abs(y1-y0)
	sx, sy := sign(x1-x0), sign(y1-y0)
	e := dx + dy
	for {
		dot(img, x0, y0, c)
		if x0 == x1 && y0 == y1 {
			return
		}
		e2 := 2 * e
		if e2 >= dy {
			e += dy
			x0 += sx
		}
		if e2 <= dx {
			e += dx
			y0 += sy
		}
	}
}

func dot(img *image.RGBA, x, y int, c color.Color) {
	img.Set(x, y, c)
	img.Set(x+1, y, c)
	img.Set(x, y+1, c)
	img.Set(x+1, y+1, c)
}

func abs(v int) int {
	if v < 0 {
		return -v
	}
	return v
}

func sign(v int) int {
	switch {
	case v < 0:
		return -1
	case v > 0:
		return 1
	}
	return 0
}

// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package layering

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// metricsHome is the one package that defines metrics: each process's are spelled there
// (internal/metrics), and the packages that observe them take them from it.
const metricsHome = "internal/metrics"

// metricDefinitions are the client library's constructors of a metric or its description.
var metricDefinitions = map[string]bool{
	"NewCounter": true, "NewCounterVec": true, "NewCounterFunc": true,
	"NewGauge": true, "NewGaugeVec": true, "NewGaugeFunc": true,
	"NewHistogram": true, "NewHistogramVec": true, "NewSummary": true, "NewSummaryVec": true,
	"NewDesc": true, "NewUntypedFunc": true,
}

// definitions returns "file:line: prometheus.X" for each metric src defines, where src
// imports the client library under any name.
func definitions(fset *token.FileSet, name string, src any) ([]string, error) {
	f, err := parser.ParseFile(fset, name, src, parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	local := ""
	for _, imp := range f.Imports {
		if strings.Trim(imp.Path.Value, `"`) == "github.com/prometheus/client_golang/prometheus" {
			local = "prometheus"
			if imp.Name != nil {
				local = imp.Name.Name
			}
		}
	}
	if local == "" {
		return nil, nil
	}
	var out []string
	ast.Inspect(f, func(n ast.Node) bool {
		sel, ok := n.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		if id, ok := sel.X.(*ast.Ident); ok && id.Name == local && metricDefinitions[sel.Sel.Name] {
			out = append(out, fset.Position(sel.Pos()).String()+": prometheus."+sel.Sel.Name)
		}
		return true
	})
	return out, nil
}

func TestMetricsDefinedOnce(t *testing.T) {
	root := moduleRoot(t)
	fset := token.NewFileSet()
	var bad []string
	homeDefines := 0
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "node_modules" || isTestOnly(rel)) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(rel, ".go") || strings.HasSuffix(rel, "_test.go") {
			return nil
		}
		defs, err := definitions(fset, path, nil)
		if err != nil {
			return err
		}
		if within(filepath.ToSlash(filepath.Dir(rel)), metricsHome) {
			homeDefines += len(defs)
			return nil
		}
		bad = append(bad, defs...)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(bad)
	for _, b := range bad {
		t.Errorf("%s: a metric defined outside %s", b, metricsHome)
	}
	if homeDefines == 0 {
		t.Errorf("%s defines no metric: the walk found nothing, so it checked nothing", metricsHome)
	}
}

// The check itself: a definition is found under the library's own name or another, and a
// use of a defined metric, or another package's New, is not one.
func TestDefinitionsFound(t *testing.T) {
	for name, c := range map[string]struct {
		src  string
		want int
	}{
		"defines": {`package p
import "github.com/prometheus/client_golang/prometheus"
var a = prometheus.NewGauge(prometheus.GaugeOpts{})
var b = prometheus.NewDesc("x", "y", nil, nil)`, 2},
		"renamed": {`package p
import prom "github.com/prometheus/client_golang/prometheus"
var a = prom.NewCounterVec(prom.CounterOpts{}, nil)`, 1},
		"uses only": {`package p
import "github.com/prometheus/client_golang/prometheus"
func f(ch chan<- prometheus.Metric, d *prometheus.Desc) { ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, 1) }`, 0},
		"another package": {`package p
import "errors"
var e = errors.New("x")`, 0},
	} {
		got, err := definitions(token.NewFileSet(), name+".go", c.src)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != c.want {
			t.Errorf("%s: definitions = %q, want %d", name, got, c.want)
		}
	}
}

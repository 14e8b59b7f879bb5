// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

// Package dashboard reads the queries of numapref's Grafana dashboard
// (charts/numapref/files/dashboard.json), for promtool (test/monitoring/promfiles) and for the
// e2e, which runs them against a real Prometheus.
package dashboard

import (
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strings"
)

// Query is one panel target.
type Query struct {
	Panel string
	Expr  string
	// Legend is the target's legendFormat ("{{label}}" for a label's value), Unit the
	// panel's Grafana unit ("bytes", "s", "ops", "percentunit", ...); either may be empty.
	Legend string
	Unit   string
}

// SampleVars fill the dashboard's variables with values that match every series: every
// node, the default namespace, every pod, Grafana's rate interval at a 15 s scrape.
var SampleVars = map[string]string{"node": ".*", "namespace": "default", "pod": ".*", "__rate_interval": "1m"}

type panel struct {
	Title       string  `json:"title"`
	Panels      []panel `json:"panels"`
	FieldConfig struct {
		Defaults struct {
			Unit string `json:"unit"`
		} `json:"defaults"`
	} `json:"fieldConfig"`
	Targets []struct {
		Expr         string `json:"expr"`
		LegendFormat string `json:"legendFormat"`
	} `json:"targets"`
}

// Queries returns every target's expression of the dashboard, in panel order, with $name
// and ${name} replaced by vars[name]. A variable vars does not name is an error, as is a
// panel target without an expression.
func Queries(data []byte, vars map[string]string) ([]Query, error) {
	var d struct {
		Panels []panel `json:"panels"`
	}
	if err := json.Unmarshal(data, &d); err != nil {
		return nil, fmt.Errorf("reading the dashboard: %w", err)
	}
	var out []Query
	var walk func([]panel) error
	walk = func(ps []panel) error {
		for _, p := range ps {
			for _, t := range p.Targets {
				expr, err := expand(t.Expr, vars)
				if err != nil {
					return fmt.Errorf("panel %q: %w", p.Title, err)
				}
				out = append(out, Query{Panel: p.Title, Expr: expr, Legend: t.LegendFormat, Unit: p.FieldConfig.Defaults.Unit})
			}
			if err := walk(p.Panels); err != nil {
				return err
			}
		}
		return nil
	}
	if err := walk(d.Panels); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("the dashboard has no queries")
	}
	return out, nil
}

func expand(expr string, vars map[string]string) (string, error) {
	if strings.TrimSpace(expr) == "" {
		return "", fmt.Errorf("a target without an expression")
	}
	names := make([]string, 0, len(vars))
	for k := range vars {
		names = append(names, k)
	}
	// Longest first, so $pod never eats the start of a longer name.
	sort.Slice(names, func(i, j int) bool { return len(names[i]) > len(names[j]) })
	for _, k := range names {
		expr = strings.ReplaceAll(expr, "${"+k+"}", vars[k])
		expr = strings.ReplaceAll(expr, "$"+k, vars[k])
	}
	if i := strings.Index(expr, "$"); i >= 0 {
		return "", fmt.Errorf("unknown variable in %q", expr[i:])
	}
	return expr, nil
}

// legendLabel is one "{{ name }}" of a legendFormat.
var legendLabel = regexp.MustCompile(`{{\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*}}`)

// Name names one series as Grafana would: the query's legendFormat with each
// {{label}} replaced by the series' value of it, or the series' labels when the query has
// no legendFormat.
func (q Query) Name(labels map[string]string) string {
	if q.Legend != "" {
		return legendLabel.ReplaceAllStringFunc(q.Legend, func(m string) string {
			return labels[legendLabel.FindStringSubmatch(m)[1]]
		})
	}
	keys := make([]string, 0, len(labels))
	for k := range labels {
		if k != "__name__" {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, k+"="+labels[k])
	}
	if len(parts) == 0 {
		return q.Expr
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

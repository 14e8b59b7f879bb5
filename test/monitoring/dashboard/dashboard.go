// Package dashboard reads the queries of numapref's Grafana dashboard
// (charts/numapref/files/dashboard.json), for promtool (test/monitoring/promfiles) and for the
// e2e, which runs them against a real Prometheus.
package dashboard

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

// Query is one panel target.
type Query struct {
	Panel string
	Expr  string
}

// SampleVars fill the dashboard's variables with values that match every series: every
// node, the default namespace, every pod, Grafana's rate interval at a 15 s scrape.
var SampleVars = map[string]string{"node": ".*", "namespace": "default", "pod": ".*", "__rate_interval": "1m"}

type panel struct {
	Title   string  `json:"title"`
	Panels  []panel `json:"panels"`
	Targets []struct {
		Expr string `json:"expr"`
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
				out = append(out, Query{Panel: p.Title, Expr: expr})
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

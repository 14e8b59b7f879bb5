// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

// Command promfiles turns numapref's monitoring objects into files promtool checks:
//
//	promfiles rules <prometheusrule.yaml     the rule groups of a rendered PrometheusRule
//	promfiles dashboard <dashboard.json      every query of a Grafana dashboard, with its
//	                                         variables filled in, as a recording rule
//
// promtool parses expressions only inside rule files, so `promtool check rules` on the second
// output proves that every dashboard query parses (make monitoring-test runs both).
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"

	"sigs.k8s.io/yaml"

	"github.com/numapref/numapref/test/monitoring/dashboard"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: promfiles rules|dashboard <input >output")
		os.Exit(2)
	}
	in, err := io.ReadAll(os.Stdin)
	if err == nil {
		var out []byte
		switch os.Args[1] {
		case "rules":
			out, err = ruleGroups(in)
		case "dashboard":
			out, err = dashboardRules(in)
		default:
			err = fmt.Errorf("unknown command %q (rules or dashboard)", os.Args[1])
		}
		if err == nil {
			_, err = os.Stdout.Write(out)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "promfiles:", err)
		os.Exit(1)
	}
}

// ruleGroups returns {groups: spec.groups} of a PrometheusRule manifest.
func ruleGroups(manifest []byte) ([]byte, error) {
	var pr struct {
		Kind string `json:"kind"`
		Spec struct {
			Groups []json.RawMessage `json:"groups"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(manifest, &pr); err != nil {
		return nil, fmt.Errorf("reading the PrometheusRule: %w", err)
	}
	if pr.Kind != "PrometheusRule" || len(pr.Spec.Groups) == 0 {
		return nil, fmt.Errorf("not a PrometheusRule with groups (kind %q, %d groups)", pr.Kind, len(pr.Spec.Groups))
	}
	return yaml.Marshal(map[string]any{"groups": pr.Spec.Groups})
}

// dashboardRules returns one rule group with a recording rule per dashboard query.
func dashboardRules(data []byte) ([]byte, error) {
	queries, err := dashboard.Queries(data, dashboard.SampleVars)
	if err != nil {
		return nil, err
	}
	var rules []map[string]string
	for i, q := range queries {
		rules = append(rules, map[string]string{"record": fmt.Sprintf("dashboard:query_%d", i), "expr": q.Expr})
	}
	return yaml.Marshal(map[string]any{"groups": []any{map[string]any{"name": "dashboard", "rules": rules}}})
}

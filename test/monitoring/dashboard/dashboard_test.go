// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package dashboard

import (
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestQueriesOfTheChartsDashboard(t *testing.T) {
	data, err := os.ReadFile("../../../charts/numapref/files/dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	queries, err := Queries(data, SampleVars)
	if err != nil {
		t.Fatal(err)
	}
	panels := map[string]bool{}
	for _, q := range queries {
		panels[q.Panel] = true
	}
	// The three views: the fleet, one preference's pods, the agent's own cost.
	for _, p := range []string{"Kernel support by node", "NUMA balancing by node", "Selected containers by reason", "SET results",
		"Memory by NUMA node", "Memory locality", "Pages migrated", "Fork to applied", "CPU", "Resident memory", "Pass durations p99"} {
		if !panels[p] {
			t.Errorf("no panel %q with a query", p)
		}
	}
}

func TestQueries(t *testing.T) {
	tests := map[string]struct {
		dashboard string
		want      []Query
		wantErr   string
	}{
		"variables in both forms, rows' panels too": {
			dashboard: `{"panels": [{"title": "a", "targets": [{"expr": "up{node=~\"$node\"}"}]},
				{"type": "row", "title": "r", "panels": [{"title": "b", "targets": [{"expr": "rate(x{pod=~\"${pod}\"}[$__rate_interval])"}]}]}]}`,
			want: []Query{{Panel: "a", Expr: `up{node=~".*"}`}, {Panel: "b", Expr: `rate(x{pod=~".*"}[1m])`}},
		},
		"an unknown variable": {
			dashboard: `{"panels": [{"title": "a", "targets": [{"expr": "up{x=\"$cluster\"}"}]}]}`,
			wantErr:   `panel "a": unknown variable in "$cluster`,
		},
		"a target without an expression": {
			dashboard: `{"panels": [{"title": "a", "targets": [{"expr": " "}]}]}`,
			wantErr:   "a target without an expression",
		},
		"no queries": {dashboard: `{"panels": []}`, wantErr: "no queries"},
		"not JSON":   {dashboard: `{`, wantErr: "reading the dashboard"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := Queries([]byte(tc.dashboard), SampleVars)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got)\n%s", diff)
			}
		})
	}
}

func TestQueryName(t *testing.T) {
	labels := map[string]string{"__name__": "m", "node": "n1", "numa_node": "0", "pod": "p"}
	tests := map[string]struct {
		q    Query
		want string
	}{
		"legendFormat":             {Query{Expr: "m", Legend: "NUMA node {{numa_node}} on {{ node }}"}, "NUMA node 0 on n1"},
		"a label the series lacks": {Query{Expr: "m", Legend: "{{reason}}!"}, "!"},
		"no legendFormat":          {Query{Expr: "m"}, "{node=n1, numa_node=0, pod=p}"},
		"no labels at all":         {Query{Expr: "sum(m)"}, "sum(m)"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := tc.q.Name(labels)
			if name == "no labels at all" {
				got = tc.q.Name(nil)
			}
			if got != tc.want {
				t.Errorf("Name = %q, want %q", got, tc.want)
			}
		})
	}
}

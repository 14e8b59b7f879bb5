// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"cmp"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
)

const statusUsage = `usage: kubectl numapref status <namespace>/<name> [flags]
       kubectl numapref status <name> -n <namespace> [flags]

Shows a NumaPreference: its summary and conditions, then every node with problems and why,
from the nodes' NumaNodeReports (the preference's own status names at most 10). With
--all-nodes, every node that runs pods of it.

flags:
`

type statusOptions struct {
	commonOptions
	allNodes bool
}

// nodeRow is one node's entry for the preference.
type nodeRow struct {
	Node        string                  `json:"node"`
	Balancing   string                  `json:"numaBalancing,omitempty"`
	Mechanisms  []string                `json:"mechanisms,omitempty"`
	Entry       numav1.PreferenceReport `json:"entry"`
	Problems    map[string]int32        `json:"problems,omitempty"`
	ProblemSize int32                   `json:"-"`
}

// statusView is what status prints, and its JSON form.
type statusView struct {
	Preference numav1.NumaPreference `json:"preference"`
	Nodes      []nodeRow             `json:"nodes"`
}

func runStatus(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var o statusOptions
	fs := flag.NewFlagSet("status", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, statusUsage)
		fs.PrintDefaults()
	}
	o.commonOptions.register(fs, "preference", "timeout of each request")
	fs.BoolVar(&o.allNodes, "all-nodes", false, "list every node that runs pods of the preference, not only those with problems")
	arg, err := o.argument(fs, args, "status", "name")
	if err != nil {
		return err
	}
	cfg, ns, name, err := o.target(arg)
	if err != nil {
		return err
	}
	scheme := runtime.NewScheme()
	if err := numav1.AddToScheme(scheme); err != nil {
		return err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return fmt.Errorf("making API client: %w", err)
	}
	view, err := readStatus(ctx, c, ns, name, o.allNodes)
	if err != nil {
		return err
	}
	if o.output == "json" {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(view)
	}
	return printStatus(stdout, view, o.allNodes)
}

// readStatus reads the preference and the entries every node's report has for it.
func readStatus(ctx context.Context, c client.Reader, ns, name string, all bool) (*statusView, error) {
	v := &statusView{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &v.Preference); err != nil {
		return nil, fmt.Errorf("reading NumaPreference %s/%s: %w", ns, name, err)
	}
	v.Preference.ManagedFields = nil
	var reports numav1.NumaNodeReportList
	if err := c.List(ctx, &reports); err != nil {
		return nil, fmt.Errorf("listing NumaNodeReports: %w", err)
	}
	for _, rep := range reports.Items {
		for _, e := range rep.Status.Preferences {
			if e.Namespace != ns || e.Name != name {
				continue
			}
			row := nodeRow{Node: rep.Name, Balancing: rep.Status.NumaBalancing, Mechanisms: rep.Status.Mechanisms, Entry: e, Problems: entryProblems(e)}
			for _, n := range row.Problems {
				row.ProblemSize += n
			}
			if all || row.ProblemSize > 0 {
				v.Nodes = append(v.Nodes, row)
			}
		}
	}
	slices.SortFunc(v.Nodes, func(a, b nodeRow) int {
		return cmp.Or(cmp.Compare(b.ProblemSize, a.ProblemSize), cmp.Compare(a.Node, b.Node))
	})
	return v, nil
}

// entryProblems are the counts of an entry that need a look, as the reason table says:
// skips but conflicts and containers not running yet, refused tasks, and containers
// without effect.
func entryProblems(e numav1.PreferenceReport) map[string]int32 {
	m := map[string]int32{}
	for _, list := range [][]numav1.ReasonCount{e.Skipped, e.Failed, e.Ineffective} {
		for _, c := range list {
			if numav1.LookupReason(c.Reason).Problem {
				m[c.Reason] += c.Count
			}
		}
	}
	if len(m) == 0 {
		return nil
	}
	return m
}

// preferenceTarget says what a preference asks: its mode, its node or allowed nodes, and
// for FollowDevices the devices followed.
func preferenceTarget(spec numav1.NumaPreferenceSpec) string {
	target := string(spec.Mode)
	if spec.Node != nil {
		target += fmt.Sprintf(", node %d", *spec.Node)
	}
	if len(spec.Nodes) > 0 {
		target += fmt.Sprintf(", allowed nodes %v", spec.Nodes)
	}
	if spec.Mode == numav1.PlacementModeFollowDevices {
		var followed []string
		if d := spec.Devices; d != nil {
			if len(d.ResourceNames) > 0 {
				followed = append(followed, "resources "+strings.Join(d.ResourceNames, ","))
			}
			if len(d.DeviceClassNames) > 0 {
				followed = append(followed, "device classes "+strings.Join(d.DeviceClassNames, ","))
			}
		}
		if len(followed) == 0 {
			followed = []string{"every device"}
		}
		target += ", following " + strings.Join(followed, " and ")
	}
	return target
}

func printStatus(w io.Writer, v *statusView, all bool) error {
	p := &v.Preference
	s := p.Status.Summary
	fmt.Fprintf(w, "NumaPreference: %s/%s (%s)\n", p.Namespace, p.Name, preferenceTarget(p.Spec))
	fmt.Fprintf(w, "Summary:        %d nodes, %d pods, %d containers, %d tasks (generation %d, observed %d)\n",
		s.Nodes, s.Pods, s.Containers, s.Tasks, p.Generation, p.Status.ObservedGeneration)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "\nCONDITION\tSTATUS\tREASON\tMESSAGE")
	for _, c := range p.Status.Conditions {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", c.Type, c.Status, c.Reason, c.Message)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(v.Nodes) == 0 {
		if all {
			fmt.Fprintln(w, "\nNo node runs pods of this preference.")
		} else {
			fmt.Fprintln(w, "\nNo node has problems.")
		}
		return nil
	}
	title := "Nodes with problems:"
	if all {
		title = "Nodes:"
	}
	fmt.Fprintf(w, "\n%s\n", title)
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tPODS\tCONTAINERS\tTASKS\tPODS BY NUMA NODE\tBALANCING\tBY\tPROBLEMS")
	for _, r := range v.Nodes {
		var byNode []string
		for _, n := range r.Entry.PodsByNode {
			byNode = append(byNode, fmt.Sprintf("%d:%d", n.Node, n.Pods))
		}
		var problems []string
		for _, reason := range slices.Sorted(maps.Keys(r.Problems)) {
			problems = append(problems, fmt.Sprintf("%s %d", reason, r.Problems[reason]))
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\t%s\t%s\t%s\n", r.Node, r.Entry.Pods, r.Entry.Containers, r.Entry.Tasks,
			orDash(strings.Join(byNode, " ")), orDash(r.Balancing), orDash(mechanismsOf(r)), orDash(strings.Join(problems, ", ")))
	}
	return tw.Flush()
}

// mechanismsOf says what gave the node's containers their home: the containers holding
// their home's memory policy, those whose pages the agent moved (and the pages), and the
// prctl where the node has it ("prctl, memoryPolicy 2, migrate 1 (5120 pages)").
func mechanismsOf(r nodeRow) string {
	var by []string
	if slices.Contains(r.Mechanisms, "prctl") {
		by = append(by, "prctl")
	}
	if n := r.Entry.MemoryPolicy; n > 0 {
		by = append(by, fmt.Sprintf("memoryPolicy %d", n))
	}
	if n := r.Entry.Migrated; n > 0 {
		by = append(by, fmt.Sprintf("migrate %d (%d pages)", n, r.Entry.PagesMigrated))
	}
	return strings.Join(by, ", ")
}

// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build integration

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
	"github.com/numapref/numapref/internal/testutil/builders"
)

// kubectl numapref status on a real apiserver: every node with problems, most first, from
// the reports; the healthy ones only with --all-nodes.
func TestStatusCommand(t *testing.T) {
	cfg, cs := apiServer(t)
	ensureNamespace(t, cs, "shop")
	scheme := runtime.NewScheme()
	if err := numav1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	pref := builders.MakePreference("shop", "db").Selector("app", "db").Node(1).Obj()
	if err := c.Create(ctx, pref); err != nil {
		t.Fatal(err)
	}
	entry := func(e numav1.PreferenceReport) numav1.PreferenceReport {
		e.Namespace, e.Name = "shop", "db"
		return e
	}
	reports := map[string]numav1.PreferenceReport{
		"node-ok": entry(numav1.PreferenceReport{Pods: 2, Containers: 2, Tasks: 40, PodsByNode: []numav1.NodeCount{{Node: 1, Pods: 2}}}),
		"node-mainline": entry(numav1.PreferenceReport{Pods: 2, Containers: 2, PodsByNode: []numav1.NodeCount{{Node: 1, Pods: 2}},
			MemoryPolicy: 1, Migrated: 1, PagesMigrated: 5120}),
		"node-pinned": entry(numav1.PreferenceReport{Pods: 1, Skipped: []numav1.ReasonCount{{Reason: numav1.ReasonMemoryPinnedElsewhere, Count: 1}}}),
		"node-old":    entry(numav1.PreferenceReport{Pods: 3, Skipped: []numav1.ReasonCount{{Reason: numav1.ReasonKernelUnsupported, Count: 3}}}),
	}
	for node, e := range reports {
		mechanisms := []string{"prctl"}
		if node == "node-mainline" {
			mechanisms = []string{"memoryPolicy", "migrate"}
		}
		rep := &numav1.NumaNodeReport{ObjectMeta: metav1.ObjectMeta{Name: node},
			Status: numav1.NumaNodeReportStatus{NumaBalancing: "normal", Mechanisms: mechanisms, Preferences: []numav1.PreferenceReport{e}}}
		if err := c.Create(ctx, rep); err != nil {
			t.Fatal(err)
		}
	}
	kubeconfig := adminKubeconfig(t, cfg)
	status := func(args ...string) string {
		t.Helper()
		var out, errOut bytes.Buffer
		if code := run(ctx, append([]string{"status", "--kubeconfig", kubeconfig}, args...), &out, &errOut); code != 0 {
			t.Fatalf("status %v: exit %d: %s", args, code, errOut.String())
		}
		return out.String()
	}
	out := status("shop/db")
	t.Logf("kubectl numapref status shop/db:\n%s", out)
	old, pinned := strings.Index(out, "node-old"), strings.Index(out, "node-pinned")
	if old < 0 || pinned < 0 || old > pinned {
		t.Errorf("want node-old (3 problems) before node-pinned (1):\n%s", out)
	}
	if strings.Contains(out, "node-ok") {
		t.Errorf("a node without problems is listed without --all-nodes:\n%s", out)
	}
	if !strings.Contains(out, "KernelUnsupported 3") || !strings.Contains(out, "MemoryPinnedElsewhere 1") {
		t.Errorf("the reasons are missing:\n%s", out)
	}
	all := status("db", "-n", "shop", "--all-nodes")
	if !strings.Contains(all, "node-ok") || !strings.Contains(all, "1:2") {
		t.Errorf("--all-nodes misses node-ok and its pods by NUMA node:\n%s", all)
	}
	if !strings.Contains(all, "memoryPolicy 1, migrate 1 (5120 pages)") {
		t.Errorf("--all-nodes does not say what gave node-mainline's containers their home:\n%s", all)
	}
	var view statusView
	if err := json.Unmarshal([]byte(status("shop/db", "-o", "json")), &view); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprintf("%d %s %v", len(view.Nodes), view.Nodes[0].Node, view.Nodes[0].Problems); got != "2 node-old map[KernelUnsupported:3]" {
		t.Errorf("json view: %s", got)
	}
	var errOut bytes.Buffer
	if code := run(ctx, []string{"status", "--kubeconfig", kubeconfig, "shop/none"}, &bytes.Buffer{}, &errOut); code != 1 || !strings.Contains(errOut.String(), "not found") {
		t.Errorf("a missing preference: exit %d, %q; want 1 and not found", code, errOut.String())
	}
}

// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package nodeagent

import (
	"github.com/numapref/numapref/internal/testutil/files"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
	"github.com/numapref/numapref/internal/nodeagent/desire"
	"github.com/numapref/numapref/internal/nodeagent/plan"
)

func TestReportBalancing(t *testing.T) {
	tests := map[string]struct {
		content string // "" for no sysctl file
		want    string
	}{
		"disabled":       {content: "0\n", want: "disabled"},
		"normal":         {content: "1\n", want: "normal"},
		"tiering":        {content: "2\n", want: "memory-tiering"},
		"both":           {content: "3\n", want: "normal-memory-tiering"},
		"no sysctl":      {want: balancingUnavailable},
		"garbage":        {content: "on\n", want: balancingUnreadable},
		"out of range":   {content: "4\n", want: balancingUnreadable},
		"negative value": {content: "-1\n", want: balancingUnreadable},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			proc := t.TempDir()
			if tc.content != "" {
				files.Write(t, filepath.Join(proc, "sys/kernel/numa_balancing"), tc.content)
			}
			m := NewMetrics()
			m.Balancing.WithLabelValues("stale").Set(1) // a mode from before must go
			m.reportBalancing(proc)
			want := `
# HELP numapref_numa_balancing 1 for the kernel.numa_balancing mode of this node (disabled, normal, memory-tiering, normal-memory-tiering; unavailable without the sysctl, unreadable when it cannot be read). Read at start and on every full pass.
# TYPE numapref_numa_balancing gauge
numapref_numa_balancing{mode="` + tc.want + `"} 1
`
			if err := testutil.CollectAndCompare(m.Balancing, strings.NewReader(want)); err != nil {
				t.Error(err)
			}
		})
	}
}

func TestReportResultsCountsTasksByReason(t *testing.T) {
	m := NewMetrics()
	m.TaskStates.WithLabelValues(numav1.ReasonKernelError).Set(9) // from an earlier pass: must go
	m.reportResults(map[desire.ContainerKey]plan.Result{
		{PodUID: "a", Container: "c"}: {Reason: numav1.ReasonApplied, Tasks: 5, Failed: map[string]int{}},
		{PodUID: "b", Container: "c"}: {Reason: numav1.ReasonPermissionDenied, Tasks: 2, Failed: map[string]int{numav1.ReasonPermissionDenied: 3}},
		{PodUID: "c", Container: "c"}: {Reason: numav1.ReasonMemoryPinnedElsewhere, SkippedTasks: 4},
		{PodUID: "d", Container: "c"}: {Reason: numav1.ReasonMemoryPinnedElsewhere, SkippedTasks: 1},
		{PodUID: "e", Container: "c"}: {Reason: numav1.ReasonNodeNotPresent},
	})
	want := `
# HELP numapref_tasks Tasks of selected containers after the last full pass, by reason: Applied (have the preferred node), PermissionDenied or KernelError (the kernel refused), MemoryPinnedElsewhere (the container was skipped). Containers skipped before their tasks are read (e.g. KernelUnsupported, NodeNotPresent) count in numapref_containers only.
# TYPE numapref_tasks gauge
numapref_tasks{reason="Applied"} 7
numapref_tasks{reason="MemoryPinnedElsewhere"} 5
numapref_tasks{reason="PermissionDenied"} 3
`
	if err := testutil.CollectAndCompare(m.TaskStates, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
	if v := testutil.ToFloat64(m.Containers.WithLabelValues(numav1.ReasonMemoryPinnedElsewhere, "")); v != 2 {
		t.Errorf("numapref_containers{reason=MemoryPinnedElsewhere} = %v, want 2", v)
	}
}

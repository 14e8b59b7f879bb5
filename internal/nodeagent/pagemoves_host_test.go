// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build host && linux

package nodeagent

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
	"github.com/numapref/numapref/internal/nodeagent/desire"
	"github.com/numapref/numapref/internal/nodeagent/migration"
	"github.com/numapref/numapref/internal/nodeagent/plan"
	"github.com/numapref/numapref/internal/numa"
	"github.com/numapref/numapref/internal/numa/migrate"
)

// On a kernel without the prctl, a running container whose preference asks for page
// migration gets it from the real worker and move_pages(2): its request covers its
// process, the worker scans the process's address space for pages on the other online
// node, and the container's result turns from MigratingPages to Applied by mechanism
// migrate, with nothing set through the kernel's preferred node. (This host has one NUMA
// node, so no page is away from node 0: the kernel lab's control kernel moves real pages.)
// A container that does not ask stays KernelUnsupported.
func TestEngineMovesPagesWithoutThePrctl(t *testing.T) {
	el := newEngineLab(t)
	_, _, d := el.container(t, "a", 0, 2)
	d.PageMigration, d.MemoryPolicy = numav1.PageMigrationOnce, numav1.MemoryPolicyNever
	_, _, off := el.container(t, "b", 0, 1)
	off.MemoryPolicy = numav1.MemoryPolicyNever

	metrics := NewMetrics()
	w, err := migration.New(&migrate.Mover{}, migration.Options{Rate: 1 << 20}, nil, metrics.Migration())
	if err != nil {
		t.Fatal(err)
	}
	w.Start()
	t.Cleanup(w.Stop)
	k := &countingKernel{}
	e, err := NewEngine(EngineConfig{Resolver: el.resolver, Kernel: k, Support: numa.Support{Reason: "no patch"},
		OnlineNodes: []int{0, 1}, LedgerPath: el.ledger, PageMover: w, Metrics: metrics})
	if err != nil {
		t.Fatal(err)
	}
	e.SetDesired([]desire.Desire{d, off})
	var r plan.Result
	waitFor(t, "the container's move to end", func() bool {
		e.Pass()
		r = e.Results()[d.Key()]
		return r.Migration.State == plan.MigrationEnded
	})
	if r.Reason != numav1.ReasonApplied || r.Mechanism != plan.MechanismMigrate || r.Migration.Ended != plan.MigrationMoved {
		t.Errorf("result %s by %q (%s), move %+v; want Applied by migrate, ended Moved", r.Reason, r.Mechanism, r.Message, r.Migration)
	}
	if st, ok := w.Status(d.Key().String()); !ok || st.Scanned == 0 {
		t.Errorf("the worker's status %+v (found %v): want the process's addresses scanned", st, ok)
	}
	if got := testutil.ToFloat64(metrics.MigrationsEnded.WithLabelValues(string(migration.ReasonMoved))); got != 1 {
		t.Errorf("numapref_migrations_ended_total{reason=Moved} = %v, want 1", got)
	}
	if r := e.Results()[off.Key()]; r.Reason != numav1.ReasonKernelUnsupported || r.Migrate {
		t.Errorf("a container not asking: %s, migrate %v; want KernelUnsupported, no move", r.Reason, r.Migrate)
	}
	if k.calls != 0 {
		t.Errorf("%d preferred-node calls without the prctl, want 0", k.calls)
	}
	if reports := PreferenceReports([]desire.PodPlan{{Namespace: "ns", Desires: []desire.Desire{d}, Selected: []string{"pref"}}},
		e.Results(), true); len(reports) != 1 || reports[0].Migrated != 1 || reports[0].Containers != 1 {
		t.Errorf("report %+v; want the container placed and counted as migrated", reports)
	}
}

// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package nodeagent

import (
	"errors"
	"os"
	"strconv"
	"time"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
	"github.com/numapref/numapref/internal/metrics"
	"github.com/numapref/numapref/internal/nodeagent/desire"
	"github.com/numapref/numapref/internal/nodeagent/migration"
	"github.com/numapref/numapref/internal/nodeagent/plan"
	"github.com/numapref/numapref/internal/numa"
)

// Metrics are the engine's Prometheus metrics (defined in internal/metrics) and how the
// engine observes them.
type Metrics struct {
	*metrics.Engine
}

// Values of the since label of numapref_fork_apply_lag_seconds.
const (
	lagSinceEvent   = "event"
	lagSinceArrival = "arrival"
)

// Values of the mode label of numapref_numa_balancing besides numa.BalancingMode.Label's.
const (
	balancingUnavailable = "unavailable" // the kernel has no NUMA balancing (no sysctl)
	balancingUnreadable  = "unreadable"  // the sysctl could not be read or parsed
)

// NewMetrics makes the engine's metrics; Register exposes them.
func NewMetrics() *Metrics { return &Metrics{Engine: metrics.NewEngine()} }

func (m *Metrics) reportPass(kind string, d time.Duration) {
	m.PassSeconds.WithLabelValues(kind).Observe(d.Seconds())
}

func (m *Metrics) reportSet(result string) { m.Sets.WithLabelValues(result).Inc() }

func (m *Metrics) reportLedgerDamaged() { m.LedgerDamaged.Set(1) }

func (m *Metrics) reportRestore() { m.Restores.Inc() }

func (m *Metrics) reportLedgerError() { m.LedgerErrs.Inc() }

func (m *Metrics) reportDesiredError() { m.DesiredErrs.Inc() }

// reportForkLag observes the lag from fork's event to the SET of its task. ownPass says
// the SET was made by the pass for this very event (else by an earlier event's pass,
// before this event arrived: only the kernel's timestamp measures that).
func (m *Metrics) reportForkLag(f *forkMark, set setMark, ownPass bool) {
	switch {
	case f.kernelNs != 0 && set.mono >= f.kernelNs:
		m.ForkLag.WithLabelValues(lagSinceEvent).Observe(float64(set.mono-f.kernelNs) / 1e9)
	case ownPass:
		m.ForkLag.WithLabelValues(lagSinceArrival).Observe(set.at.Sub(f.arrival).Seconds())
	}
	if !ownPass {
		return
	}
	if d, ok := f.stages(set); ok {
		for i, stage := range forkStageNames {
			m.ForkStages.WithLabelValues(stage).Observe(d[i].Seconds())
		}
	}
}

// reportStartToPlaced observes the time from a container's start to its first placement,
// which was at (PlacedAtStart or PlacedAtAfterStart).
func (m *Metrics) reportStartToPlaced(at string, d time.Duration) {
	m.StartToPlaced.WithLabelValues(at).Observe(d.Seconds())
}

// reportBalancing sets the numa_balancing gauge from procRoot/sys/kernel/numa_balancing.
func (m *Metrics) reportBalancing(procRoot string) {
	mode, err := numa.ReadBalancing(procRoot)
	label := mode.Label()
	switch {
	case errors.Is(err, os.ErrNotExist):
		label = balancingUnavailable
	case err != nil:
		label = balancingUnreadable
	}
	m.Balancing.Reset()
	m.Balancing.WithLabelValues(label).Set(1)
}

// reportResults sets the gauges from a full pass's results.
func (m *Metrics) reportResults(results map[desire.ContainerKey]plan.Result) {
	m.Containers.Reset()
	m.TaskStates.Reset()
	tasks := 0
	for _, r := range results {
		node := ""
		if r.Reason == numav1.ReasonApplied {
			node = strconv.Itoa(r.Node)
		}
		m.Containers.WithLabelValues(r.Reason, node).Inc()
		tasks += r.Tasks
		for reason, n := range r.Failed {
			m.TaskStates.WithLabelValues(reason).Add(float64(n))
		}
		if r.SkippedTasks > 0 {
			m.TaskStates.WithLabelValues(r.Reason).Add(float64(r.SkippedTasks))
		}
	}
	m.Tasks.Set(float64(tasks))
	m.TaskStates.WithLabelValues(numav1.ReasonApplied).Set(float64(tasks))
}

func (m *Metrics) reportKernel(backend string, supported bool) {
	v := 0.0
	if supported {
		v = 1
	}
	m.Kernel.WithLabelValues(backend).Set(v)
}

// MigrationMetrics is what the page mover (migration.Worker) tells the engine's metrics.
type MigrationMetrics struct{ m *Metrics }

// Migration is the page mover's view of the metrics.
func (m *Metrics) Migration() MigrationMetrics { return MigrationMetrics{m} }

// PagesMoved counts pages moved to their home.
func (mm MigrationMetrics) PagesMoved(n int) { mm.m.PagesMigrated.Add(float64(n)) }

// PagesFailed counts pages the kernel did not move.
func (mm MigrationMetrics) PagesFailed(n int) { mm.m.PagesNotMigrated.Add(float64(n)) }

// RequestEnded counts a container's move that ended, by why.
func (mm MigrationMetrics) RequestEnded(r migration.Reason) {
	mm.m.MigrationsEnded.WithLabelValues(string(r)).Inc()
}

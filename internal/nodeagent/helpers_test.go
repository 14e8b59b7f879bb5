// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package nodeagent

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/numapref/numapref/internal/nodeagent/desire"
	"github.com/numapref/numapref/internal/nodeagent/known"
	"github.com/numapref/numapref/internal/nodeagent/ledger"
	"github.com/numapref/numapref/internal/testutil/poll"
)

// Helpers of every tier's tests in this package.

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	poll.True(t, 10*time.Second, what, cond)
}

// startEngine runs e's apply loop until the test ends.
func startEngine(t testing.TB, e *Engine) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() { runEngine(t, ctx, e); close(stopped) }()
	t.Cleanup(func() { cancel(); <-stopped }) // before the cleanups registered earlier (an emulator)
}

// runEngine runs e's apply loop until ctx ends; it is for a goroutine of its own, so it
// fails the test with Error, not Fatal.
func runEngine(t testing.TB, ctx context.Context, e *Engine) {
	if err := e.Start(ctx); err != nil {
		t.Errorf("engine: %v", err)
	}
}

type histStats struct {
	count uint64
	sum   float64 // seconds
}

// passStats reads the engine's pass duration histogram of kind.
func passStats(tb testing.TB, m *Metrics, kind string) histStats {
	tb.Helper()
	return histogramStats(tb, m.PassSeconds.WithLabelValues(kind).(prometheus.Histogram))
}

// stageStats reads the fork lag stage's histogram of m.
func stageStats(tb testing.TB, m *Metrics, stage string) histStats {
	tb.Helper()
	return histogramStats(tb, m.ForkStages.WithLabelValues(stage).(prometheus.Histogram))
}

// histogramStats reads the sample count and sum of h.
func histogramStats(tb testing.TB, h prometheus.Metric) histStats {
	tb.Helper()
	var out dto.Metric
	if err := h.Write(&out); err != nil {
		tb.Fatal(err)
	}
	return histStats{count: out.GetHistogram().GetSampleCount(), sum: out.GetHistogram().GetSampleSum()}
}

func sameSet(a, b []int) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// readLedger reads the ledger file at path, as a restarted engine would.
func readLedger(path string) (known.Containers, error) { return ledger.Read(path, 0) }

// ledgerTask is a copy of the ledger entry of task tid of container key, nil if none.
func ledgerTask(e *Engine, key desire.ContainerKey, tid int) *known.Task {
	t, ok := e.ledger.View().Entry(key).Task(tid)
	if !ok {
		return nil
	}
	return &t
}

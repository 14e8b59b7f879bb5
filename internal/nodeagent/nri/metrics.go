// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package nri

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/numapref/numapref/internal/metrics"
)

// collector reports a plugin's Stats as the agent's metrics (defined in internal/metrics).
type collector struct {
	p *Plugin
	metrics.NRI
}

// NewCollector returns the metrics of plugin p: whether it is connected, and its counts.
func NewCollector(p *Plugin) prometheus.Collector {
	return &collector{p: p, NRI: metrics.NewNRI()}
}

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.All() {
		ch <- d
	}
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	s := c.p.Stats()
	connected := 0.0
	if c.p.Connected() {
		connected = 1
	}
	ch <- prometheus.MustNewConstMetric(c.Connected, prometheus.GaugeValue, connected)
	for _, m := range []struct {
		d *prometheus.Desc
		v uint64
	}{{c.Connects, s.Connects}, {c.Disconnects, s.Disconnects}, {c.Starts, s.Starts}, {c.Creates, s.Creates}, {c.Policies, s.Policies}, {c.Late, s.Late}, {c.Panics, s.Panics}} {
		ch <- prometheus.MustNewConstMetric(m.d, prometheus.CounterValue, float64(m.v))
	}
}

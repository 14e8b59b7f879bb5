// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

// Package metrics defines every Prometheus metric numapref's processes export, by process:
// agent.go the node agent's (its engine, the effect of its preferences, its NRI plugin and
// its controllers), summarizer.go the summarizer's, api.go the API requests both count.
// Each metric's name, help and labels are spelled here only; the packages that observe
// them hold the values (a vector) or read them at scrape time (a description). Labels are
// bounded: reasons are the API's fixed set, never pod or task names, except the effect
// metrics' namespace, pod and container of the selected containers on one node.
//
// Dashboards and alerts (charts/numapref, test/monitoring) know these names: a change
// here is a change there.
package metrics

import "github.com/prometheus/client_golang/prometheus"

// namespace prefixes every metric: numapref_<name>.
const namespace = "numapref"

func counter(name, help string) prometheus.Counter {
	return prometheus.NewCounter(prometheus.CounterOpts{Namespace: namespace, Name: name, Help: help})
}

func counterVec(name, help string, labels ...string) *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: name, Help: help}, labels)
}

func gauge(name, help string) prometheus.Gauge {
	return prometheus.NewGauge(prometheus.GaugeOpts{Namespace: namespace, Name: name, Help: help})
}

func gaugeVec(name, help string, labels ...string) *prometheus.GaugeVec {
	return prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: namespace, Name: name, Help: help}, labels)
}

func histogramVec(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
	return prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: namespace, Name: name, Help: help, Buckets: buckets}, labels)
}

func desc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc(namespace+"_"+name, help, labels, nil)
}

// register adds cs to reg, stopping at the first refusal.
func register(reg prometheus.Registerer, cs ...prometheus.Collector) error {
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}

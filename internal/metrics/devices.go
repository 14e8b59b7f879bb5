// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package metrics

import "github.com/prometheus/client_golang/prometheus"

// Devices holds the metrics of reading the kubelet's device allocations for mode
// FollowDevices (internal/nodeagent/devices observes them).
type Devices struct {
	// Calls counts the calls to the kubelet's PodResources API by method (Get, List) and
	// result (ok, unavailable, refused, timeout, error); Seconds times them.
	Calls   *prometheus.CounterVec
	Seconds *prometheus.HistogramVec
	// Reads counts the reads of one pod's allocations by result (ok, error): at most one
	// per pod and retry, never one per pass.
	Reads *prometheus.CounterVec
}

// NewDevices makes the device allocation metrics; Register exposes them.
func NewDevices() *Devices {
	return &Devices{
		Calls: counterVec("pod_resources_calls_total",
			"Calls to the kubelet's PodResources API (mode FollowDevices), by method (Get, List) and result: ok; unavailable "+
				"(no socket, or the kubelet does not serve the method); refused (the kubelet denied the agent); timeout (no "+
				"answer within --pod-resources-timeout); error.", "method", "result"),
		Seconds: histogramVec("pod_resources_call_duration_seconds",
			"Duration of the calls to the kubelet's PodResources API, by method, timeouts included.",
			prometheus.ExponentialBuckets(0.0005, 4, 8), "method"),
		Reads: counterVec("device_allocation_reads_total",
			"Reads of one pod's device allocations (mode FollowDevices: the kubelet's PodResources and, for DRA devices, "+
				"their ResourceSlices and ResourceClaims), by result (ok, error). One per new pod, and one per retry of a failed read.",
			"result"),
	}
}

// Register adds the device allocation metrics to reg.
func (m *Devices) Register(reg prometheus.Registerer) error {
	return register(reg, m.Calls, m.Seconds, m.Reads)
}

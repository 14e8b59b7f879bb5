// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package metrics

import "github.com/prometheus/client_golang/prometheus"

// The summarizer's metrics: the API requests it sends, beside controller-runtime's own
// (its queue, its reconciles, the leader election).

// RegisterSummarizer registers the summarizer's metrics in reg.
func RegisterSummarizer(reg prometheus.Registerer) error {
	return register(reg, APIRequests)
}

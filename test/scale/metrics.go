// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"k8s.io/client-go/rest"
)

// apiCounters are the apiserver's own counters the harness reads, at one moment or as the
// difference between two moments.
type apiCounters struct {
	// requests is apiserver_request_total by verb, resource and response code.
	requests map[requestKey]float64
	// watchBytes and watchEvents are apiserver_watch_events_sizes_sum and _count by
	// resource: every event counts once per watcher it is sent to.
	watchBytes, watchEvents map[string]float64
	// rssBytes is process_resident_memory_bytes (a gauge: a difference keeps the later
	// value); cpuSeconds is process_cpu_seconds_total.
	rssBytes, cpuSeconds float64
}

// requestKey is one apiserver_request_total series, less the labels the harness does not
// tell apart. resource is "resource[/subresource][.group]", e.g. "numapreferences/status.numa.numapref.io".
type requestKey struct {
	verb, resource, code string
}

// writeVerbs are the verbs of apiserver_request_total that change state. APPLY is a PATCH
// with a server-side-apply body.
var writeVerbs = map[string]bool{"POST": true, "PUT": true, "PATCH": true, "APPLY": true, "DELETE": true, "DELETECOLLECTION": true}

// background are resources whose writes and watch events are not the system under test:
// the apiserver's own heartbeat leases (the harness's managers run without leader
// election). They are left out of every figure but the breakdown.
var background = map[string]bool{"leases.coordination.k8s.io": true}

// parseAPICounters reads the apiserver's /metrics text.
func parseAPICounters(r io.Reader) (apiCounters, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(r)
	if err != nil {
		return apiCounters{}, fmt.Errorf("parsing the apiserver's metrics: %w", err)
	}
	c := apiCounters{requests: map[requestKey]float64{}, watchBytes: map[string]float64{}, watchEvents: map[string]float64{}}
	if f := families["apiserver_request_total"]; f != nil {
		for _, m := range f.GetMetric() {
			l := labels(m)
			res := l["resource"]
			if res == "" {
				continue // non-resource paths: /metrics, /readyz, discovery
			}
			if l["subresource"] != "" {
				res += "/" + l["subresource"]
			}
			if l["group"] != "" {
				res += "." + l["group"]
			}
			c.requests[requestKey{verb: l["verb"], resource: res, code: l["code"]}] += m.GetCounter().GetValue()
		}
	}
	if f := families["apiserver_watch_events_sizes"]; f != nil {
		for _, m := range f.GetMetric() {
			l := labels(m)
			res := l["resource"]
			if l["group"] != "" {
				res += "." + l["group"]
			}
			c.watchBytes[res] += m.GetHistogram().GetSampleSum()
			c.watchEvents[res] += float64(m.GetHistogram().GetSampleCount())
		}
	}
	if f := families["process_resident_memory_bytes"]; f != nil && len(f.GetMetric()) > 0 {
		c.rssBytes = f.GetMetric()[0].GetGauge().GetValue()
	}
	if f := families["process_cpu_seconds_total"]; f != nil && len(f.GetMetric()) > 0 {
		c.cpuSeconds = f.GetMetric()[0].GetCounter().GetValue()
	}
	return c, nil
}

func labels(m *dto.Metric) map[string]string {
	out := make(map[string]string, len(m.GetLabel()))
	for _, p := range m.GetLabel() {
		out[p.GetName()] = p.GetValue()
	}
	return out
}

// since is what the counters gained from before to c; the gauge keeps c's value.
func (c apiCounters) since(before apiCounters) apiCounters {
	d := apiCounters{
		requests:    subtract(c.requests, before.requests),
		watchBytes:  subtract(c.watchBytes, before.watchBytes),
		watchEvents: subtract(c.watchEvents, before.watchEvents),
		rssBytes:    c.rssBytes,
		cpuSeconds:  c.cpuSeconds - before.cpuSeconds,
	}
	return d
}

// subtract returns b-a per key, leaving out keys that did not move.
func subtract[K comparable](b, a map[K]float64) map[K]float64 {
	out := map[K]float64{}
	for k, v := range b {
		if v-a[k] != 0 {
			out[k] = v - a[k]
		}
	}
	return out
}

// writes counts the requests that change state, less background; failed counts those
// of them answered with anything but 2xx.
func (c apiCounters) writes() (all, failed int64) {
	for k, v := range c.requests {
		if !writeVerbs[k.verb] || background[k.resource] {
			continue
		}
		all += int64(v)
		if !strings.HasPrefix(k.code, "2") {
			failed += int64(v)
		}
	}
	return all, failed
}

// writesBy counts writes (less background) by resource.
func (c apiCounters) writesBy() map[string]int64 {
	out := map[string]int64{}
	for k, v := range c.requests {
		if writeVerbs[k.verb] && !background[k.resource] {
			out[k.resource] += int64(v)
		}
	}
	return out
}

// watched adds up the bytes and events sent to watchers, less background.
func (c apiCounters) watched() (bytes, events int64) {
	for res, v := range c.watchBytes {
		if !background[res] {
			bytes += int64(v)
			events += int64(c.watchEvents[res])
		}
	}
	return bytes, events
}

// breakdown describes the counters by resource, for the log.
func (c apiCounters) breakdown() string {
	var parts, failed []string
	writes := c.writesBy()
	for _, res := range slices.Sorted(maps.Keys(writes)) {
		parts = append(parts, fmt.Sprintf("write %s=%d", res, writes[res]))
	}
	for k, v := range c.requests {
		if writeVerbs[k.verb] && !strings.HasPrefix(k.code, "2") {
			failed = append(failed, fmt.Sprintf("failed %s %s code %s=%d", k.verb, k.resource, k.code, int64(v)))
		}
	}
	slices.Sort(failed)
	parts = append(parts, failed...)
	for _, res := range slices.Sorted(maps.Keys(c.watchBytes)) {
		parts = append(parts, fmt.Sprintf("watch %s=%d B in %d events", res, int64(c.watchBytes[res]), int64(c.watchEvents[res])))
	}
	return strings.Join(parts, ", ")
}

// scrapeAPIServer reads the apiserver's /metrics through rc.
func scrapeAPIServer(ctx context.Context, rc rest.Interface) (apiCounters, error) {
	body, err := rc.Get().AbsPath("/metrics").Stream(ctx)
	if err != nil {
		return apiCounters{}, fmt.Errorf("reading the apiserver's /metrics: %w", err)
	}
	defer body.Close()
	return parseAPICounters(body)
}

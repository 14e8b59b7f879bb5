// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// A cut of kube-apiserver 1.37's /metrics, with the series the harness reads and some it
// must pass over.
const metricsBefore = `# HELP apiserver_request_total [STABLE] Counter of apiserver requests broken out for each verb, dry run value, group, version, resource, scope, component, and HTTP response code.
# TYPE apiserver_request_total counter
apiserver_request_total{code="200",component="",dry_run="",group="",resource="",scope="",subresource="/readyz",verb="GET",version=""} 3
apiserver_request_total{code="200",component="apiserver",dry_run="",group="numa.numapref.io",resource="numanodereports",scope="resource",subresource="",verb="APPLY",version="v1alpha1"} 10
apiserver_request_total{code="200",component="apiserver",dry_run="",group="numa.numapref.io",resource="numapreferences",scope="resource",subresource="status",verb="APPLY",version="v1alpha1"} 1
apiserver_request_total{code="200",component="apiserver",dry_run="",group="coordination.k8s.io",resource="leases",scope="resource",subresource="",verb="PUT",version="v1"} 7
apiserver_request_total{code="201",component="apiserver",dry_run="",group="",resource="pods",scope="resource",subresource="",verb="POST",version="v1"} 20
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="pods",scope="namespace",subresource="",verb="LIST",version="v1"} 4
# HELP apiserver_watch_events_sizes [BETA] Watch event size distribution in bytes
# TYPE apiserver_watch_events_sizes histogram
apiserver_watch_events_sizes_bucket{group="numa.numapref.io",resource="numanodereports",version="v1alpha1",le="1024"} 0
apiserver_watch_events_sizes_bucket{group="numa.numapref.io",resource="numanodereports",version="v1alpha1",le="+Inf"} 20
apiserver_watch_events_sizes_sum{group="numa.numapref.io",resource="numanodereports",version="v1alpha1"} 25680
apiserver_watch_events_sizes_count{group="numa.numapref.io",resource="numanodereports",version="v1alpha1"} 20
apiserver_watch_events_sizes_bucket{group="coordination.k8s.io",resource="leases",version="v1",le="+Inf"} 1
apiserver_watch_events_sizes_sum{group="coordination.k8s.io",resource="leases",version="v1"} 738
apiserver_watch_events_sizes_count{group="coordination.k8s.io",resource="leases",version="v1"} 1
# HELP process_cpu_seconds_total [ALPHA] Total user and system CPU time spent in seconds.
# TYPE process_cpu_seconds_total counter
process_cpu_seconds_total 1.29
# HELP process_resident_memory_bytes [ALPHA] Resident memory size in bytes.
# TYPE process_resident_memory_bytes gauge
process_resident_memory_bytes 2.79293952e+08
`

// metricsAfter: 10 more report applies, one of them refused (409), one status write, a
// lease renewal, and 20 report and 11 preference events to watchers.
const metricsAfter = `# TYPE apiserver_request_total counter
apiserver_request_total{code="200",component="",dry_run="",group="",resource="",scope="",subresource="/readyz",verb="GET",version=""} 9
apiserver_request_total{code="200",component="apiserver",dry_run="",group="numa.numapref.io",resource="numanodereports",scope="resource",subresource="",verb="APPLY",version="v1alpha1"} 19
apiserver_request_total{code="409",component="apiserver",dry_run="",group="numa.numapref.io",resource="numanodereports",scope="resource",subresource="",verb="APPLY",version="v1alpha1"} 1
apiserver_request_total{code="200",component="apiserver",dry_run="",group="numa.numapref.io",resource="numapreferences",scope="resource",subresource="status",verb="APPLY",version="v1alpha1"} 2
apiserver_request_total{code="200",component="apiserver",dry_run="",group="coordination.k8s.io",resource="leases",scope="resource",subresource="",verb="PUT",version="v1"} 8
apiserver_request_total{code="201",component="apiserver",dry_run="",group="",resource="pods",scope="resource",subresource="",verb="POST",version="v1"} 20
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="pods",scope="namespace",subresource="",verb="LIST",version="v1"} 9
# TYPE apiserver_watch_events_sizes histogram
apiserver_watch_events_sizes_bucket{group="numa.numapref.io",resource="numanodereports",version="v1alpha1",le="+Inf"} 40
apiserver_watch_events_sizes_sum{group="numa.numapref.io",resource="numanodereports",version="v1alpha1"} 51360
apiserver_watch_events_sizes_count{group="numa.numapref.io",resource="numanodereports",version="v1alpha1"} 40
apiserver_watch_events_sizes_bucket{group="numa.numapref.io",resource="numapreferences",version="v1alpha1",le="+Inf"} 11
apiserver_watch_events_sizes_sum{group="numa.numapref.io",resource="numapreferences",version="v1alpha1"} 25564
apiserver_watch_events_sizes_count{group="numa.numapref.io",resource="numapreferences",version="v1alpha1"} 11
apiserver_watch_events_sizes_bucket{group="coordination.k8s.io",resource="leases",version="v1",le="+Inf"} 2
apiserver_watch_events_sizes_sum{group="coordination.k8s.io",resource="leases",version="v1"} 1476
apiserver_watch_events_sizes_count{group="coordination.k8s.io",resource="leases",version="v1"} 2
# TYPE process_cpu_seconds_total counter
process_cpu_seconds_total 3.79
# TYPE process_resident_memory_bytes gauge
process_resident_memory_bytes 3.145728e+08
`

func TestParseAPICounters(t *testing.T) {
	got, err := parseAPICounters(strings.NewReader(metricsBefore))
	if err != nil {
		t.Fatal(err)
	}
	want := apiCounters{
		requests: map[requestKey]float64{
			{verb: "APPLY", resource: "numanodereports.numa.numapref.io", code: "200"}:        10,
			{verb: "APPLY", resource: "numapreferences/status.numa.numapref.io", code: "200"}: 1,
			{verb: "PUT", resource: "leases.coordination.k8s.io", code: "200"}:                7,
			{verb: "POST", resource: "pods", code: "201"}:                                     20,
			{verb: "LIST", resource: "pods", code: "200"}:                                     4,
		},
		watchBytes:  map[string]float64{"numanodereports.numa.numapref.io": 25680, "leases.coordination.k8s.io": 738},
		watchEvents: map[string]float64{"numanodereports.numa.numapref.io": 20, "leases.coordination.k8s.io": 1},
		rssBytes:    279293952,
		cpuSeconds:  1.29,
	}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(apiCounters{}, requestKey{})); diff != "" {
		t.Errorf("parseAPICounters (-want +got):\n%s", diff)
	}
}

func TestCountersSince(t *testing.T) {
	before, err := parseAPICounters(strings.NewReader(metricsBefore))
	if err != nil {
		t.Fatal(err)
	}
	after, err := parseAPICounters(strings.NewReader(metricsAfter))
	if err != nil {
		t.Fatal(err)
	}
	d := after.since(before)

	type figures struct {
		Writes, Failed, WatchBytes, WatchEvents int64
		ByResource                              map[string]int64
		CPU, RSS                                float64
	}
	got := figures{ByResource: d.writesBy(), CPU: d.cpuSeconds, RSS: d.rssBytes}
	got.Writes, got.Failed = d.writes()
	got.WatchBytes, got.WatchEvents = d.watched()
	want := figures{
		// 9 + 1 refused report applies and one status write; the lease renewal, the pods
		// (unchanged) and every read are left out.
		Writes: 11, Failed: 1,
		ByResource: map[string]int64{"numanodereports.numa.numapref.io": 10, "numapreferences/status.numa.numapref.io": 1},
		// 20 report events and 11 preference events; the lease's one is background.
		WatchBytes: 25680 + 25564, WatchEvents: 31,
		CPU: 2.5, RSS: 314572800,
	}
	if diff := cmp.Diff(want, got, cmpFloat); diff != "" {
		t.Errorf("figures (-want +got):\n%s", diff)
	}
}

var cmpFloat = cmp.Comparer(func(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 })

func TestParseAPICountersRejectsGarbage(t *testing.T) {
	if _, err := parseAPICounters(strings.NewReader("apiserver_request_total{code=\"200\" 3\n")); err == nil {
		t.Error("want an error for a line cut in its labels")
	}
}

// The line adds up rollout and churn, and divides the churn's watch bytes by the nodes.
func TestResultLine(t *testing.T) {
	before, _ := parseAPICounters(strings.NewReader(metricsBefore))
	after, _ := parseAPICounters(strings.NewReader(metricsAfter))
	d := after.since(before)
	r := &result{
		o:       &options{design: "new", mode: "reports", nodes: 10, podsPerNode: 2},
		phases:  []phase{{name: "rollout", took: time.Second, api: d}, {name: "churn", took: 2 * time.Second, api: d}},
		largest: 2300, largestName: "numapreference/scale", converged: true,
	}
	line := r.line()
	for _, want := range []string{
		"design=new mode=reports nodes=10 pods-per-node=2 writes=22 failed-writes=2 client-errors=0 watch-bytes=102488 bytes-per-node-change=5124 ",
		"largest-object=2300B(numapreference/scale) converged=true rollout=1s/11w/51244B churn=2s/11w/51244B status-writes=1/1 ",
		"converge=3s ",
	} {
		if !strings.Contains(line, want) {
			t.Errorf("line %q lacks %q", line, want)
		}
	}
}

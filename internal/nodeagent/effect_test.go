// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package nodeagent

import (
	"github.com/numapref/numapref/internal/testutil/files"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
)

// fixedView is a managedLister with a fixed answer.
type fixedView []ManagedContainer

func (v fixedView) Managed() []ManagedContainer { return v }

const effectV2Dir = "testdata/effect/v2/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1234.slice/cri-containerd-abc.scope"

// On cgroup v2 the memory comes from the container's memory.numa_stat (anon+file per
// node) and the faults from the sched files of its listed tasks; tasks gone are skipped,
// a damaged sched file is counted as a read error, and only listed containers get series.
func TestEffectCollectorCgroupV2Fixture(t *testing.T) {
	view := fixedView{
		{PodNamespace: "ns", PodName: "db", Container: "main", Node: 1, Reason: numav1.ReasonApplied,
			CgroupDir: effectV2Dir, TIDs: []int{700, 701, 702, 703}, PIDs: []int{700}},
		// The same names again (an older pod still going away): reported once.
		{PodNamespace: "ns", PodName: "db", Container: "main", Node: 0, Reason: numav1.ReasonApplied,
			CgroupDir: effectV2Dir, TIDs: []int{700}, PIDs: []int{700}},
		// Skipped before listing: no series at all.
		{PodNamespace: "ns", PodName: "idle", Container: "main", Node: 1, Reason: numav1.ReasonNodeNotPresent},
	}
	c := NewEffectCollector(view, "testdata/effect/proc", 2)
	want := `
# HELP numapref_container_memory_bytes Memory of the container on each NUMA node: anon+file of memory.numa_stat on cgroup v2; on cgroup v1 the pages mapped by its processes (/proc/<pid>/numa_maps, each process once, shared pages in every process mapping them).
# TYPE numapref_container_memory_bytes gauge
numapref_container_memory_bytes{container="main",namespace="ns",numa_node="0",pod="db"} 1.572864e+06
numapref_container_memory_bytes{container="main",namespace="ns",numa_node="1",pod="db"} 3.145728e+06
# HELP numapref_container_memory_locality_ratio Share of the container's memory (numapref_container_memory_bytes) on its preferred NUMA node, 0 to 1.
# TYPE numapref_container_memory_locality_ratio gauge
numapref_container_memory_locality_ratio{container="main",namespace="ns",pod="db"} 0.6666666666666666
# HELP numapref_container_numa_faults NUMA hinting faults of the container's tasks: the sum of total_numa_faults in /proc/<tid>/sched over the tasks the agent listed last. The kernel decays each task's count, and exited tasks drop out, so this is a gauge.
# TYPE numapref_container_numa_faults gauge
numapref_container_numa_faults{container="main",namespace="ns",pod="db"} 42
# HELP numapref_container_numa_pages_migrated Pages NUMA balancing migrated for the container's tasks: the sum of numa_pages_migrated in /proc/<tid>/sched over the tasks the agent listed last (drops when tasks exit).
# TYPE numapref_container_numa_pages_migrated gauge
numapref_container_numa_pages_migrated{container="main",namespace="ns",pod="db"} 125
# HELP numapref_effect_read_errors_total Reads the effect metrics skipped because a file of a live task or cgroup could not be read or parsed, by source.
# TYPE numapref_effect_read_errors_total counter
numapref_effect_read_errors_total{source="numa_maps"} 0
numapref_effect_read_errors_total{source="numa_stat"} 0
numapref_effect_read_errors_total{source="sched"} 1
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
	// The collector passes the registry's consistency checks and the metric lint.
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(c); err != nil {
		t.Fatal(err)
	}
	if _, err := reg.Gather(); err != nil {
		t.Errorf("gathering: %v", err)
	}
	if problems, err := testutil.CollectAndLint(c); err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %v", problems, err)
	}
}

// On cgroup v2, a live cgroup without memory.numa_stat (memory controller not enabled)
// and one with a damaged file get no memory series and are counted as read errors, once
// per collection; a cgroup that is gone (the container ended since the listing) is not.
// The sched files are there, so every container still has its fault series, and the
// scrape never fails.
func TestEffectCollectorCgroupV2WithoutNumaStat(t *testing.T) {
	damaged := t.TempDir()
	files.Write(t, filepath.Join(damaged, "memory.numa_stat"), "total=12 N0=12\n") // the v1 format
	view := fixedView{
		{PodNamespace: "ns", PodName: "a", Container: "c", CgroupDir: t.TempDir(), TIDs: []int{700}},
		{PodNamespace: "ns", PodName: "b", Container: "c", CgroupDir: damaged, TIDs: []int{701}},
		{PodNamespace: "ns", PodName: "gone", Container: "c", CgroupDir: filepath.Join(t.TempDir(), "ended"), TIDs: []int{700}},
	}
	c := NewEffectCollector(view, "testdata/effect/proc", 2)
	if n := testutil.CollectAndCount(c, "numapref_container_memory_bytes", "numapref_container_memory_locality_ratio"); n != 0 {
		t.Errorf("%d memory series without a readable memory.numa_stat, want 0", n)
	}
	if n := testutil.CollectAndCount(c, "numapref_container_numa_faults"); n != 3 {
		t.Errorf("%d fault series, want 3 (the sched files are there)", n)
	}
	if v := readErrors(t, c, effectSourceNumaStat); v != 6 { // two live cgroups, three collections
		t.Errorf("numa_stat read errors = %v, want 6", v)
	}
	scrape(t, c)
}

// On cgroup v1, a process whose numa_maps opened but could not be read to its end (here a
// directory: the read fails, as it does when the process exits mid-read) is counted, and
// its container gets no memory series that scrape, since the sum would be short; a
// process gone before the open (no /proc entry) is skipped without an error. The scrape
// still succeeds, with every other series.
func TestEffectCollectorNumaMapsVanishingMidRead(t *testing.T) {
	proc := t.TempDir()
	files.Write(t, filepath.Join(proc, "800", "numa_maps"), "7f0000000000 default anon=256 dirty=256 N0=192 N1=64 kernelpagesize_kB=4\n")
	files.Write(t, filepath.Join(proc, "801", "numa_maps"), "7f0000000000 default anon=16 N1=16 kernelpagesize_kB=4\n")
	if err := os.MkdirAll(filepath.Join(proc, "802", "numa_maps"), 0o755); err != nil { // opens, read fails
		t.Fatal(err)
	}
	view := fixedView{
		// 803 has no /proc entry: it exited before the scrape.
		{PodNamespace: "ns", PodName: "whole", Container: "c", Node: 1, CgroupDir: "/lab/whole", PIDs: []int{800, 801, 803}},
		{PodNamespace: "ns", PodName: "cut", Container: "c", Node: 1, CgroupDir: "/lab/cut", PIDs: []int{800, 802}},
	}
	c := NewEffectCollector(view, proc, 1)
	c.pageSize = 4096
	if got := gaugeValue(t, c, "numapref_container_memory_locality_ratio", map[string]string{"pod": "whole"}); got != 80.0/272 {
		t.Errorf("locality of the whole container = %v, want %v (80 of 272 pages on node 1)", got, 80.0/272)
	}
	if n := countSeries(t, c, "numapref_container_memory_bytes", "cut"); n != 0 {
		t.Errorf("%d memory series for the container whose numa_maps was cut short, want 0", n)
	}
	if v := readErrors(t, c, effectSourceNumaMaps); v != 3 { // the one cut read, in each of three collections
		t.Errorf("numa_maps read errors = %v, want 3", v)
	}
	scrape(t, c)
}

// scrape serves c the way the agent's /metrics does and fails unless the answer is 200.
func scrape(t *testing.T, c prometheus.Collector) {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(c); err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.HTTPErrorOnError}).
		ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), "numapref_effect_read_errors_total") {
		t.Errorf("scrape: HTTP %d:\n%s", rec.Code, rec.Body.String())
	}
}

// gaugeValue collects c and returns the value of the one series of name whose labels
// include want.
func gaugeValue(t *testing.T, c prometheus.Collector, name string, want map[string]string) float64 {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(c); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var found []float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metrics:
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if v, ok := want[lp.GetName()]; ok && v != lp.GetValue() {
					continue metrics
				}
			}
			found = append(found, m.GetGauge().GetValue())
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d series of %s with %v, want 1", len(found), name, want)
	}
	return found[0]
}

// countSeries counts the series of name whose pod label is pod.
func countSeries(t *testing.T, c prometheus.Collector, name, pod string) int {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(c); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "pod" && l.GetValue() == pod {
					n++
				}
			}
		}
	}
	return n
}

// readErrors returns numapref_effect_read_errors_total{source} from one collection.
func readErrors(t *testing.T, c prometheus.Collector, source string) float64 {
	t.Helper()
	ch := make(chan prometheus.Metric, 64)
	go func() { c.Collect(ch); close(ch) }()
	v := math.NaN()
	for m := range ch {
		if !strings.Contains(m.Desc().String(), `"numapref_effect_read_errors_total"`) {
			continue
		}
		var pb dto.Metric
		if err := m.Write(&pb); err != nil {
			t.Fatal(err)
		}
		if pb.GetLabel()[0].GetValue() == source {
			v = pb.GetCounter().GetValue()
		}
	}
	return v
}

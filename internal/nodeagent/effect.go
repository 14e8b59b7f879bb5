// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package nodeagent

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/numapref/numapref/internal/fsutil"
	"github.com/numapref/numapref/internal/metrics"
	"github.com/numapref/numapref/internal/nodeagent/cgroups"
	"github.com/numapref/numapref/internal/numa"
)

// managedLister gives the selected containers to report on; *Engine is one.
type managedLister interface {
	Managed() []ManagedContainer
}

// Sources of numapref_effect_read_errors_total.
const (
	effectSourceSched    = "sched"
	effectSourceNumaStat = "numa_stat"
	effectSourceNumaMaps = "numa_maps"
)

// EffectCollector reports, at scrape time, what the preference does to each selected
// container: NUMA hinting faults and page migrations of its tasks, where its memory is,
// and how much of it is on the preferred node. It reads the host only when scraped, so
// the engine's passes pay nothing for it. Series exist only for containers whose tasks
// the engine listed on its last pass.
type EffectCollector struct {
	view          managedLister
	procRoot      string
	cgroupVersion int
	pageSize      uint64

	desc      metrics.Effect
	errCounts map[string]*atomic.Uint64
}

var _ prometheus.Collector = (*EffectCollector)(nil)

// NewEffectCollector makes a collector for the containers view reports. procRoot is the
// host's /proc; cgroupVersion (Resolver.Layout().Version) picks the memory source:
// memory.numa_stat of the container's cgroup on v2, /proc/<pid>/numa_maps of its
// processes on v1 (whose memory.numa_stat counts pages of the whole hierarchy in a format
// that differs by kernel).
func NewEffectCollector(view managedLister, procRoot string, cgroupVersion int) *EffectCollector {
	c := &EffectCollector{
		view: view, procRoot: procRoot, cgroupVersion: cgroupVersion, pageSize: uint64(os.Getpagesize()),
		desc:      metrics.NewEffect(),
		errCounts: map[string]*atomic.Uint64{},
	}
	for _, s := range []string{effectSourceSched, effectSourceNumaStat, effectSourceNumaMaps} {
		c.errCounts[s] = &atomic.Uint64{}
	}
	return c
}

// Describe sends the fixed descriptions of the collector's metrics.
func (c *EffectCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.desc.All() {
		ch <- d
	}
}

// Collect reads the host for every listed container and sends its series.
func (c *EffectCollector) Collect(ch chan<- prometheus.Metric) {
	seen := map[[3]string]bool{}
	for _, mc := range c.view.Managed() {
		key := [3]string{mc.PodNamespace, mc.PodName, mc.Container}
		if mc.CgroupDir == "" || seen[key] {
			continue // not listed, or an older pod of the same name still going away
		}
		seen[key] = true
		c.collectContainer(ch, mc)
	}
	for _, s := range []string{effectSourceNumaMaps, effectSourceNumaStat, effectSourceSched} {
		ch <- prometheus.MustNewConstMetric(c.desc.ReadErrors, prometheus.CounterValue, float64(c.errCounts[s].Load()), s)
	}
}

func (c *EffectCollector) collectContainer(ch chan<- prometheus.Metric, mc ManagedContainer) {
	labels := []string{mc.PodNamespace, mc.PodName, mc.Container}
	if faults, migrated, ok := c.schedTotals(mc.TIDs); ok {
		ch <- prometheus.MustNewConstMetric(c.desc.Faults, prometheus.GaugeValue, float64(faults), labels...)
		ch <- prometheus.MustNewConstMetric(c.desc.Migrated, prometheus.GaugeValue, float64(migrated), labels...)
	}
	var perNode map[int]uint64
	if c.cgroupVersion == 2 {
		perNode = c.numaStatMemory(mc.CgroupDir)
	} else {
		perNode = c.numaMapsMemory(mc.PIDs)
	}
	if len(perNode) == 0 {
		return
	}
	var total uint64
	for _, node := range slices.Sorted(maps.Keys(perNode)) {
		total += perNode[node]
		ch <- prometheus.MustNewConstMetric(c.desc.Memory, prometheus.GaugeValue, float64(perNode[node]),
			append(labels, strconv.Itoa(node))...)
	}
	if total > 0 {
		ch <- prometheus.MustNewConstMetric(c.desc.Locality, prometheus.GaugeValue,
			float64(perNode[mc.Node])/float64(total), labels...)
	}
}

// schedTotals sums the NUMA counters of tids; ok is false when no task reported them
// (a kernel without NUMA balancing statistics, or every task gone).
func (c *EffectCollector) schedTotals(tids []int) (faults, migrated uint64, ok bool) {
	for _, tid := range tids {
		s, err := numa.ReadSchedNUMA(c.procRoot, tid)
		if errors.Is(err, numa.ErrTaskGone) || cgroups.IsGone(err) {
			continue // exited since the listing: its counters went with it
		}
		if err != nil {
			c.countError(effectSourceSched, err)
			continue
		}
		if !s.Present {
			continue
		}
		faults += s.TotalFaults
		migrated += s.PagesMigrated
		ok = true
	}
	return faults, migrated, ok
}

// numaStatMemory reads the container's memory per node from its memory.numa_stat (cgroup
// v2). A cgroup that is gone (the container ended since the listing) has none, and is
// not an error; a live cgroup whose file is missing (the memory controller is not enabled
// for it) or damaged is counted, and the container gets no memory series.
func (c *EffectCollector) numaStatMemory(dir string) map[int]uint64 {
	perNode, err := numa.ReadNumaStatMemory(filepath.Join(dir, "memory.numa_stat"))
	if err == nil {
		return perNode
	}
	if _, statErr := os.Stat(dir); cgroups.IsGone(statErr) {
		return nil
	}
	c.countError(effectSourceNumaStat, err)
	return nil
}

// numaMapsMemory sums the bytes each process of pids maps, per node (cgroup v1). A process
// that is gone before its numa_maps opens has left the container and is skipped. One whose
// file opened but could not be read to its end (the process exited mid-read, or the read
// failed) or parsed is counted, and the container gets no memory series this scrape: a
// sum without it would show a locality that is not the container's.
func (c *EffectCollector) numaMapsMemory(pids []int) map[int]uint64 {
	perNode := map[int]uint64{}
	complete := true
	for _, pid := range pids {
		data, err := fsutil.ReadFileInto(filepath.Join(c.procRoot, strconv.Itoa(pid), "numa_maps"), nil)
		if goneBeforeOpen(err) {
			continue
		}
		if err == nil {
			err = numa.AddNumaMaps(perNode, string(data), c.pageSize)
		}
		if err != nil {
			c.countError(effectSourceNumaMaps, fmt.Errorf("process %d: %w", pid, err))
			complete = false
		}
	}
	if !complete {
		return nil
	}
	return perNode
}

// goneBeforeOpen tells an open that failed because the process or file is gone from a
// failure after the file opened.
func goneBeforeOpen(err error) bool {
	var pe *fs.PathError
	return errors.As(err, &pe) && pe.Op == "open" && cgroups.IsGone(err)
}

// countError counts one skipped read of source; the callers leave out what is normal (a
// task or cgroup gone since the listing).
func (c *EffectCollector) countError(source string, err error) {
	if err != nil {
		c.errCounts[source].Add(1)
	}
}

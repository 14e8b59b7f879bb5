// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build host && linux

package nodeagent

import (
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
	"github.com/numapref/numapref/internal/nodeagent/desire"
	"github.com/numapref/numapref/internal/numa"
)

// On the real host: the tasks gauge counts the tasks of an applied container and of one
// skipped because its cpuset.mems excludes the node, and numa_balancing shows the
// host's sysctl.
func TestEngineReportsTasksAndBalancing(t *testing.T) {
	el := newEngineLab(t)
	w, _, d := el.container(t, "a", 0, 3)
	pinned, c, dp := el.container(t, "pinned", 1, 2)
	if err := c.SetMems("0"); err != nil {
		t.Fatal(err)
	}
	m := NewMetrics()
	e := el.engineWith(t, EngineConfig{Metrics: m})
	mode, err := numa.ReadBalancing("/proc")
	if err != nil {
		t.Fatal(err)
	}
	if v := testutil.ToFloat64(m.Balancing.WithLabelValues(mode.Label())); v != 1 {
		t.Errorf("numapref_numa_balancing{mode=%q} after NewEngine = %v, want 1", mode.Label(), v)
	}
	e.SetDesired([]desire.Desire{d, dp})
	el.settle(t, e, w.Pid())
	e.Pass() // settle may stop right after a pass that caught late threads: count them all
	applied, err := w.TIDs()
	if err != nil {
		t.Fatal(err)
	}
	skipped, err := pinned.TIDs()
	if err != nil {
		t.Fatal(err)
	}
	if v := testutil.ToFloat64(m.TaskStates.WithLabelValues(numav1.ReasonApplied)); int(v) != len(applied) {
		t.Errorf("numapref_tasks{reason=Applied} = %v, want %d", v, len(applied))
	}
	if v := testutil.ToFloat64(m.TaskStates.WithLabelValues(numav1.ReasonMemoryPinnedElsewhere)); int(v) != len(skipped) {
		t.Errorf("numapref_tasks{reason=MemoryPinnedElsewhere} = %v, want %d", v, len(skipped))
	}
	if n := testutil.CollectAndCount(m.Balancing); n != 1 {
		t.Errorf("%d numa_balancing series, want 1", n)
	}
}

// A child forked in a selected container is set by the pass its fork event starts, and
// the lag from the kernel's timestamp of the event to the SET is observed.
func TestEngineReportsForkApplyLag(t *testing.T) {
	el := newEngineLab(t)
	pe := openProcEvents(t)
	w, _, d := el.container(t, "a", 0, 2)
	m := NewMetrics()
	e := el.engineWith(t, EngineConfig{ProcEvents: pe.Events(), Metrics: m})
	start := time.Now() // every observed fork happens after this
	startEngine(t, e)
	e.SetDesired([]desire.Desire{d})
	waitFor(t, "the workload has node 0", func() bool { return allEqual(el.values(t, w.Pid()), 0) })

	// A fork() child starts without a preference; only its fork event can bring it in
	// (the rescan interval is an hour).
	var children []int
	for range 3 {
		child, err := w.RawFork()
		if err != nil {
			t.Fatal(err)
		}
		children = append(children, child)
	}
	waitFor(t, "the forked children have node 0", func() bool { return allEqual(el.values(t, children...), 0) })
	// In a burst, one child's pass may set the others, and on a loaded host every child may
	// be set so by another event's pass; a child forked alone, once the burst's events are
	// all handled, is set by its own event's pass, which observes the stages.
	waitFor(t, "the burst's fork lags are observed", func() bool {
		var bm dto.Metric
		if err := m.ForkLag.WithLabelValues(lagSinceEvent).(prometheus.Metric).Write(&bm); err != nil {
			t.Fatal(err)
		}
		return bm.GetHistogram().GetSampleCount() >= uint64(len(children))
	})
	last, err := w.RawFork()
	if err != nil {
		t.Fatal(err)
	}
	children = append(children, last)
	waitFor(t, "the last child has node 0", func() bool { return allEqual(el.values(t, last), 0) })
	// A child an earlier event's pass set is observed when its own event comes. (A thread
	// the workload started during the first pass may add an observation of its own.)
	var pb dto.Metric
	waitFor(t, "every child's fork lag is observed", func() bool {
		pb.Reset()
		if err := m.ForkLag.WithLabelValues(lagSinceEvent).(prometheus.Metric).Write(&pb); err != nil {
			t.Fatal(err)
		}
		return pb.GetHistogram().GetSampleCount() >= uint64(len(children))
	})
	elapsed := time.Since(start)
	if n := testutil.CollectAndCount(m.ForkLag); n != 1 {
		t.Errorf("%d fork lag series, want 1 (since=event)", n)
	}
	count, sum := pb.GetHistogram().GetSampleCount(), pb.GetHistogram().GetSampleSum()
	if sum <= 0 || sum > float64(count)*elapsed.Seconds() {
		t.Errorf("fork lag sum = %vs over %d observations; want each above 0 and below the %v the test took", sum, count, elapsed)
	}
	// The stages of each fork its own pass set: as many of each, the writeahead (an fsync)
	// and the set taking time, and together no more than the lags.
	own := stageStats(t, m, stageSet).count
	if own == 0 || own > count {
		t.Fatalf("%d forks have stages, want 1 to %d", own, count)
	}
	var stages float64
	for _, stage := range forkStageNames {
		st := stageStats(t, m, stage)
		if st.count != own {
			t.Errorf("stage %s observed %d times, want %d", stage, st.count, own)
		}
		if (stage == stageWriteAhead || stage == stageSet) && st.sum <= 0 {
			t.Errorf("stage %s took no time over %d forks", stage, own)
		}
		stages += st.sum
	}
	if stages <= 0 || stages > sum+1e-6 {
		t.Errorf("the stages add up to %vs, want above 0 and at most the lags' %vs", stages, sum)
	}
}

// The view lists every selected container with what the last pass found; a skipped one
// has no cgroup or tasks, and the copies it returns are the caller's.
func TestEngineManagedView(t *testing.T) {
	el := newEngineLab(t)
	w, _, d := el.container(t, "a", 0, 3)
	_, _, missing := el.container(t, "b", 3, 1) // NodeNotPresent: never listed
	e := el.engine(t)
	if got := e.Managed(); len(got) != 0 {
		t.Fatalf("Managed() before any pass = %+v, want none", got)
	}
	e.SetDesired([]desire.Desire{missing, d})
	el.settle(t, e, w.Pid())
	e.Pass()

	got := e.Managed()
	if len(got) != 2 || got[0].PodName != "a" || got[1].PodName != "b" {
		t.Fatalf("Managed() = %+v, want pods a and b in that order", got)
	}
	a, b := got[0], got[1]
	tids, err := w.TIDs()
	if err != nil {
		t.Fatal(err)
	}
	if a.PodNamespace != "ns" || a.PodUID != string(d.PodUID) || a.Container != "main" || a.Node != 0 ||
		a.Reason != numav1.ReasonApplied || a.Tasks != len(tids) {
		t.Errorf("view of a = %+v, want ns/a main, node 0, Applied with %d tasks", a, len(tids))
	}
	if !sameSet(a.TIDs, tids) || !slices.Equal(a.PIDs, []int{w.Pid()}) {
		t.Errorf("view of a lists tasks %v of processes %v, want %v of %d", a.TIDs, a.PIDs, tids, w.Pid())
	}
	if want := filepath.Join(el.resolver.Layout().Root, el.resolver.Layout().TaskHierarchies[0], a.CgroupPath); a.CgroupPath == "" || a.CgroupDir != want {
		t.Errorf("view of a: cgroup %q at %q, want the container's cgroup at %q", a.CgroupPath, a.CgroupDir, want)
	}
	if b.Reason != numav1.ReasonNodeNotPresent || b.CgroupDir != "" || b.TIDs != nil || b.Node != 3 {
		t.Errorf("view of skipped b = %+v, want NodeNotPresent, node 3, no cgroup and no tasks", b)
	}

	got[0].TIDs[0] = -5
	if again := e.Managed(); again[0].TIDs[0] == -5 {
		t.Error("changing a returned view changed the engine's")
	}

	e.SetDesired(nil)
	e.Pass()
	if got := e.Managed(); len(got) != 0 {
		t.Errorf("Managed() after the desire went = %+v, want none", got)
	}
}

// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package nodeagent

import (
	"errors"
	"github.com/numapref/numapref/internal/testutil/files"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/numapref/numapref/internal/nodeagent/desire"
	"github.com/numapref/numapref/internal/numa"
)

// filterRecorder is the socket's filter, as the engine sets it.
type filterRecorder struct {
	set      []numa.ForkFilter
	failSome bool // refuse every filter that does not pass all forks
}

func (r *filterRecorder) FilterForks(f numa.ForkFilter) error {
	if r.failSome && !f.All() {
		return errors.New("refused")
	}
	r.set = append(r.set, f)
	return nil
}

// The engine narrows the kernel's fork filter to its listed processes and a mark that
// follows the last pid one reading behind; it passes every fork until two readings, after
// the pids wrap around, when the last pid is unreadable, and when the narrow filter is
// refused. A fork it has no container for schedules one reading, not one per fork.
func TestForkWatch(t *testing.T) {
	h := newFakeHost(t)
	h.addTask(100, -1)
	h.addTask(101, -1)
	rec := &filterRecorder{}
	fc := clocktesting.NewFakeClock(time.Now())
	e := h.engine(EngineConfig{ForkFilter: rec, Clock: fc})
	e.SetDesired([]desire.Desire{fakeDesire(0)})
	lastPid := filepath.Join(h.proc, "sys", "kernel", "ns_last_pid")
	mark := func(pid string) {
		t.Helper()
		if pid == "" {
			if err := os.Remove(lastPid); err != nil {
				t.Fatal(err)
			}
		} else {
			files.Write(t, lastPid, pid+"\n")
		}
		e.markForks()
	}
	every := numa.ForkFilter{}
	narrow := func(above int) numa.ForkFilter { return numa.ForkFilter{Above: above, TGIDs: []int{100}} }
	steps := []struct {
		name string
		do   func()
		want []numa.ForkFilter
	}{
		{"the first pass", e.Pass, []numa.ForkFilter{every}},
		{"one reading", func() { mark("500") }, nil},
		{"two readings", func() { mark("600") }, []numa.ForkFilter{narrow(500)}},
		{"a pass that lists the same", e.Pass, nil},
		{"a third reading", func() { mark("700") }, []numa.ForkFilter{narrow(600)}},
		{"the pids wrapped", func() { mark("50") }, []numa.ForkFilter{every}},
		{"one reading after the wrap", func() { mark("80") }, []numa.ForkFilter{narrow(50)}},
		{"the last pid unreadable", func() { mark("") }, []numa.ForkFilter{every}},
		{"two readings again, the narrow filter refused", func() { rec.failSome = true; mark("900"); mark("950") }, []numa.ForkFilter{every}},
	}
	for _, s := range steps {
		before := len(rec.set)
		s.do()
		if diff := cmp.Diff(s.want, rec.set[before:], cmpopts.EquateEmpty(), cmp.Comparer(func(a, b numa.ForkFilter) bool { return a.Equal(b) })); diff != "" {
			t.Errorf("%s: filters set (-want +got):\n%s", s.name, diff)
		}
	}

	for range 3 {
		e.onProcEvent(numa.ProcEvent{Kind: numa.ProcEventFork, ParentTGID: 4000, ParentTID: 4000, ChildTID: 4001, ChildTGID: 4001})
	}
	if n := fc.Waiters(); n != 1 {
		t.Fatalf("%d timers after three unrelated forks, want one reading", n)
	}
	// The first reading after a quiet spell comes forkMarkEvery after the passed fork;
	// while passed forks keep coming, each waits twice as long, up to a second (each
	// reading that moves the mark attaches a new filter); after a quiet second, 100 ms
	// again.
	unrelated := func() {
		e.onProcEvent(numa.ProcEvent{Kind: numa.ProcEventFork, ParentTGID: 4000, ParentTID: 4000, ChildTID: 4001, ChildTGID: 4001})
	}
	due := func(after time.Duration) {
		t.Helper()
		fc.Step(after - time.Millisecond)
		select {
		case <-e.forks.markDue:
			t.Fatalf("a reading due before %v", after)
		default:
		}
		fc.Step(time.Millisecond)
		select {
		case <-e.forks.markDue:
		case <-time.After(10 * time.Second):
			t.Fatalf("no reading due %v after a passed fork", after)
		}
		e.markForks()
	}
	due(100 * time.Millisecond)
	for _, after := range []time.Duration{200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond, time.Second, time.Second} {
		unrelated()
		due(after)
	}
	fc.Step(forkMarkMax + time.Millisecond)
	unrelated()
	due(100 * time.Millisecond)
}

// The attached filter stays while, with the same mark, it passes whatever the wanted one
// does and few processes it names are gone: a forking server's children, born after the
// mark, attach nothing when listed or when they exit.
func TestKeepFilter(t *testing.T) {
	server := numa.ForkFilter{Above: 500, TGIDs: []int{100}}
	stale := func(n int) numa.ForkFilter {
		f := numa.ForkFilter{Above: 500, TGIDs: []int{100}}
		for i := range n {
			f.TGIDs = append(f.TGIDs, 600+i)
		}
		return f
	}
	for _, tc := range []struct {
		name           string
		attached, want numa.ForkFilter
		keep           bool
	}{
		{"the same", server, server, true},
		{"a child born after the mark listed", server, numa.ForkFilter{Above: 500, TGIDs: []int{100, 601}}, true},
		{"a process born before the mark listed", server, numa.ForkFilter{Above: 500, TGIDs: []int{100, 450}}, false},
		{"the children gone, a few", stale(maxStaleTGIDs), server, true},
		{"the children gone, too many", stale(maxStaleTGIDs + 1), server, false},
		{"the mark moved", server, numa.ForkFilter{Above: 700, TGIDs: []int{100}}, false},
		{"every fork, narrowed", numa.ForkFilter{}, server, false},
		{"narrow, every fork wanted", server, numa.ForkFilter{}, false},
	} {
		if got := keepFilter(tc.attached, tc.want); got != tc.keep {
			t.Errorf("%s: keepFilter = %v, want %v", tc.name, got, tc.keep)
		}
	}
}

// A fork pass that lists a new process judges the filter only when the attached one does
// not pass that process's forks: a child born after the mark (a forking server's) costs
// no judging, one born before it (a pid reused below the mark) gets a filter that names it.
func TestForkPassJudgesTheFilterOnlyForWhatItDoesNotPass(t *testing.T) {
	h := newFakeHost(t)
	h.addTask(100, -1)
	rec := &filterRecorder{}
	fc := clocktesting.NewFakeClock(time.Now())
	e := h.engine(EngineConfig{ForkFilter: rec, Clock: fc})
	e.SetDesired([]desire.Desire{fakeDesire(0)})
	e.Pass()
	lastPid := filepath.Join(h.proc, "sys", "kernel", "ns_last_pid")
	for _, pid := range []string{"500", "600"} {
		files.Write(t, lastPid, pid+"\n")
		e.markForks()
	}
	fork := func(child int) {
		h.addTask(child, -1)
		e.onProcEvent(numa.ProcEvent{Kind: numa.ProcEventFork, ParentTGID: 100, ParentTID: 100, ChildTGID: child, ChildTID: child})
	}
	before := len(rec.set)
	fork(650)
	if got := rec.set[before:]; len(got) != 0 {
		t.Errorf("a child born after the mark attached %v: the attached filter passes its forks already", got)
	}
	fork(450)
	want := numa.ForkFilter{Above: 500, TGIDs: []int{100, 450, 650}}
	if got := rec.set[before:]; len(got) != 1 || !got[0].Equal(want) {
		t.Errorf("a process born before the mark attached %v, want [%v]", got, want)
	}
	if v := h.value(450); v != 0 {
		t.Errorf("the process below the mark holds %d, want 0", v)
	}
}

// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package nodeagent

import (
	"fmt"
	"github.com/numapref/numapref/internal/testutil/files"
	"maps"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/numapref/numapref/internal/cpuset"
	"github.com/numapref/numapref/internal/nodeagent/cgroups"
	"github.com/numapref/numapref/internal/nodeagent/desire"
	"github.com/numapref/numapref/internal/nodeagent/plan"
	"github.com/numapref/numapref/internal/numa"
)

// fakeHost is one container of fake tasks, for the unit tests of the engine: a resolver
// listing them (all in one process, the first task's), a /proc with their start times,
// and a kernel holding their values. onGet and onSet, when set, run before every GET and
// SET. It is safe for an engine's loop and the test to use at once.
type fakeHost struct {
	t    *testing.T
	proc string

	mu           sync.Mutex
	tids         []int
	values       map[int]int
	onGet, onSet func(tid int)
	// cpus is the container's cpuset.cpus; threadIDsErrs the number of listings around
	// SETs (ThreadIDs) still to fail.
	cpus          []int
	threadIDsErrs int
	// reads counts the calls that read the container's cgroup, by method: Resolve,
	// ListTIDs, Cpuset, ThreadIDs.
	reads map[string]int
}

func newFakeHost(t *testing.T) *fakeHost {
	return &fakeHost{t: t, proc: t.TempDir(), values: map[int]int{}, reads: map[string]int{}}
}

// fakeDesire is the desire for node of the fake host's container.
func fakeDesire(node int) desire.Desire {
	return desire.Desire{PodUID: "pod", Container: "main", Node: node,
		Ref: cgroups.ContainerRef{PodUID: "pod", ContainerID: "containerd://x"}}
}

// engine makes an engine on the host with cfg's other settings.
func (h *fakeHost) engine(cfg EngineConfig) *Engine {
	h.t.Helper()
	e, err := h.newEngine(cfg)
	if err != nil {
		h.t.Fatal(err)
	}
	return e
}

// newEngine is engine for a test of NewEngine's error.
func (h *fakeHost) newEngine(cfg EngineConfig) (*Engine, error) {
	cfg.Resolver, cfg.Kernel, cfg.ProcRoot = h, h, h.proc
	cfg.Support = numa.Support{Supported: true, Backend: "fake"}
	cfg.OnlineNodes = []int{0, 1}
	cfg.handles = noPIDFDs // fake task ids may name real tasks of this host
	if cfg.LedgerPath == "" {
		cfg.LedgerPath = filepath.Join(h.t.TempDir(), "ledger.json")
	}
	return NewEngine(cfg)
}

// addTask starts task tid in the container with value.
func (h *fakeHost) addTask(tid, value int) {
	h.t.Helper()
	stat := fmt.Sprintf("%d (task) S 1 %d %d 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 %d 0 0\n", tid, tid, tid, 1000+tid)
	files.Write(h.t, filepath.Join(h.proc, fmt.Sprint(tid), "stat"), stat)
	h.mu.Lock()
	defer h.mu.Unlock()
	h.tids = append(h.tids, tid)
	h.values[tid] = value
}

// replaceTask ends task 101 and gives its id to a new task (a later start time) holding
// value, inside the container or outside it.
func (h *fakeHost) replaceTask(value int, inside bool) {
	h.t.Helper()
	const tid = 101
	stat := fmt.Sprintf("%d (stranger) S 1 %d %d 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 %d 0 0\n", tid, tid, tid, 5000+tid)
	files.Write(h.t, filepath.Join(h.proc, fmt.Sprint(tid), "stat"), stat)
	h.mu.Lock()
	defer h.mu.Unlock()
	if !inside {
		h.tids = slices.DeleteFunc(h.tids, func(t int) bool { return t == tid })
	}
	h.values[tid] = value
}

// moveOut moves task tid out of the container.
func (h *fakeHost) moveOut(tid int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.tids = slices.DeleteFunc(h.tids, func(t int) bool { return t == tid })
}

func (h *fakeHost) hasTask(tid int) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Contains(h.tids, tid)
}

// value returns tid's value in the kernel.
func (h *fakeHost) value(tid int) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.values[tid]
}

// snapshot returns a copy of every task's value.
func (h *fakeHost) snapshot() map[int]int {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make(map[int]int, len(h.values))
	for tid, v := range h.values {
		out[tid] = v
	}
	return out
}

// readCounts is a copy of reads.
func (h *fakeHost) readCounts() map[string]int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return maps.Clone(h.reads)
}

func (h *fakeHost) Resolve(ref cgroups.ContainerRef) (*cgroups.Container, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.reads["Resolve"]++
	return &cgroups.Container{Ref: ref, Path: "/fake"}, nil
}

func (h *fakeHost) ListTIDs(*cgroups.Container) ([]cgroups.TaskRef, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.reads["ListTIDs"]++
	var out []cgroups.TaskRef
	for _, tid := range h.tids {
		out = append(out, cgroups.TaskRef{TGID: h.tids[0], TID: tid})
	}
	return out, nil
}

func (h *fakeHost) ThreadIDs(*cgroups.Container) ([]int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.reads["ThreadIDs"]++
	if h.threadIDsErrs > 0 {
		h.threadIDsErrs--
		return nil, fmt.Errorf("reading cgroup.threads of /fake: %w", unix.EIO)
	}
	tids := slices.Clone(h.tids)
	slices.Sort(tids)
	return tids, nil
}

func (h *fakeHost) Cpuset(*cgroups.Container) (cpuset.Cpuset, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.reads["Cpuset"]++
	return cpuset.Cpuset{Mems: []int{0, 1}, CPUs: slices.Clone(h.cpus)}, nil
}

// setCPUs changes the container's cpuset.cpus, and fails the next n listings around SETs.
func (h *fakeHost) setCPUs(cpus []int, failListings int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.cpus, h.threadIDsErrs = cpus, failListings
}

func (h *fakeHost) Get(tid int) (int, error) {
	if h.onGet != nil {
		h.onGet(tid)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	v, ok := h.values[tid]
	if !ok {
		return 0, unix.ESRCH
	}
	return v, nil
}

func (h *fakeHost) Set(tid, nid int) error {
	if h.onSet != nil {
		h.onSet(tid)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.values[tid]; !ok {
		return unix.ESRCH
	}
	h.values[tid] = nid
	return nil
}

// noPIDFDs is a plan.PIDFDOpener that has none: tasks are identified by start time alone.
func noPIDFDs(tid, _ int) (plan.TaskHandle, error) {
	return nil, fmt.Errorf("task %d: %w", tid, numa.ErrNoPIDFD)
}

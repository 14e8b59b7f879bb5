// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build host && linux

package nodeagent

import (
	"github.com/numapref/numapref/internal/testutil/files"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
	"github.com/numapref/numapref/internal/nodeagent/cgroups"
	"github.com/numapref/numapref/internal/nodeagent/desire"
	"github.com/numapref/numapref/internal/numa"
	"github.com/numapref/numapref/internal/numa/emulator"
	"github.com/numapref/numapref/internal/numa/prctl"
	"github.com/numapref/numapref/internal/testutil/hostlab"
	"github.com/numapref/numapref/internal/testutil/testenv"
)

// engineLab is a real host setup for engine tests: lab cgroups on this machine's real
// hierarchies, a resolver pointed at them, and the kernel emulator (this kernel lacks the
// patch) on a machine with two possible NUMA nodes. The emulator follows task creation
// (proc connector) as the kernel does, so threads the Go runtime adds later inherit.
type engineLab struct {
	lab      *hostlab.Lab
	resolver *cgroups.Resolver
	emu      *emulator.Emulator
	emuOpts  emulator.Options
	ledger   string
}

func newEngineLab(t *testing.T) *engineLab {
	t.Helper()
	lab := newLab(t)
	r, err := cgroups.NewResolver("/", cgroups.ResolverOptions{Driver: cgroups.DriverCgroupfs, KubeletCgroupRoot: lab.KubeletCgroupRoot()})
	if err != nil {
		t.Fatal(err)
	}
	sys := t.TempDir()
	files.Write(t, filepath.Join(sys, "devices/system/node/possible"), "0-1\n")
	el := &engineLab{lab: lab, resolver: r, ledger: filepath.Join(t.TempDir(), "ledger.json"),
		emuOpts: emulator.Options{StateDir: t.TempDir(), ProcRoot: "/proc", SysRoot: sys, ForkEvents: true}}
	el.openEmulator(t)
	return el
}

// newLab makes a hostlab root on this host's real cgroups, removed when the test ends.
func newLab(t *testing.T) *hostlab.Lab {
	t.Helper()
	testenv.RequireRoot(t) // real cgroups, real processes
	lab, err := hostlab.New("/sys/fs/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := lab.Close(); err != nil {
			t.Error(err)
		}
	})
	return lab
}

// openProcEvents opens the proc connector (fork events) until the test ends.
func openProcEvents(t testing.TB) *numa.ProcEvents {
	t.Helper()
	pe, err := numa.OpenProcEvents()
	testenv.RequireNoError(t, err, "opening the proc connector (CAP_NET_ADMIN)", "sudo make host")
	t.Cleanup(func() { pe.Close() })
	return pe
}

func (el *engineLab) openEmulator(t *testing.T) {
	t.Helper()
	emu, err := emulator.New(el.emuOpts)
	if err != nil {
		t.Fatal(err)
	}
	el.emu = emu
	t.Cleanup(func() { emu.Close() })
}

func (el *engineLab) engine(t *testing.T) *Engine {
	t.Helper()
	return el.engineWith(t, EngineConfig{})
}

// engineWith makes an engine on the lab, with the emulator unless cfg names a kernel,
// nodes 0 and 1, the lab's ledger and an hour between rescans unless cfg says otherwise.
func (el *engineLab) engineWith(t *testing.T, cfg EngineConfig) *Engine {
	t.Helper()
	cfg.Resolver, cfg.Support, cfg.OnlineNodes, cfg.LedgerPath = el.resolver, el.emu.Support(), []int{0, 1}, el.ledger
	cfg.Log = testr.New(t)
	if cfg.Kernel == nil {
		cfg.Kernel = el.emu
	}
	if cfg.RescanInterval == 0 {
		cfg.RescanInterval = time.Hour
	}
	e, err := NewEngine(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// This host has one NUMA node, so every real cpuset holds node 0 only: the engine applies
// node 0 here; the emulated machine has two possible nodes so an application can hold 1.

// container makes a lab container running a workload with extra threads, and the desire
// that asks for node.
func (el *engineLab) container(t *testing.T, name string, node, threads int) (*hostlab.Workload, *hostlab.Container, desire.Desire) {
	t.Helper()
	podUID, c, w, err := el.lab.NamedWorkload(corev1.PodQOSBurstable, t.Name()+name, threads)
	if err != nil {
		t.Fatal(err)
	}
	d := desire.Desire{Pod: types.NamespacedName{Namespace: "ns", Name: name}, PodUID: types.UID(podUID), Container: "main",
		Ref: cgroups.ContainerRef{PodUID: podUID, QOS: corev1.PodQOSBurstable, ContainerID: c.ContainerID}, Node: node, Preference: "pref"}
	return w, c, d
}

// values reads every task of the workload's process tree through the emulator.
func (el *engineLab) values(t *testing.T, pids ...int) map[int]int {
	t.Helper()
	out := map[int]int{}
	for _, pid := range pids {
		tids, err := hostlab.TasksOf(pid)
		if err != nil {
			t.Fatal(err)
		}
		for _, tid := range tids {
			v, err := el.emu.Get(tid)
			if err != nil {
				t.Fatalf("emulated GET of %d: %v", tid, err)
			}
			out[tid] = v
		}
	}
	return out
}

// settle runs passes until every task of pids has node 0, as rescans would: a thread the
// Go runtime starts while a pass runs is only caught by the next one (without events).
func (el *engineLab) settle(t *testing.T, e *Engine, pids ...int) map[int]int {
	t.Helper()
	var v map[int]int
	for range 20 {
		e.Pass()
		if v = el.values(t, pids...); allEqual(v, 0) {
			break
		}
	}
	return v
}

func allEqual(m map[int]int, want int) bool {
	for _, v := range m {
		if v != want {
			return false
		}
	}
	return len(m) > 0
}

func TestEngineAppliesToEveryTaskAndUndoes(t *testing.T) {
	el := newEngineLab(t)
	w, _, d := el.container(t, "a", 0, 6)
	other, _, _ := el.container(t, "bystander", 0, 2) // never selected: must never change

	m := NewMetrics()
	reg := prometheus.NewPedanticRegistry()
	if err := m.Register(reg); err != nil {
		t.Fatal(err)
	}
	e := el.engineWith(t, EngineConfig{Metrics: m})
	e.SetDesired([]desire.Desire{d})
	got := el.settle(t, e, w.Pid())
	if !allEqual(got, 0) || len(got) < 7 {
		t.Fatalf("after apply, tasks have %v; want every one of at least 7 at node 0", got)
	}
	r := e.Results()[d.Key()]
	if r.Reason != numav1.ReasonApplied || r.Tasks != len(got) {
		t.Errorf("result = %s with %d tasks, want Applied with %d", r.Reason, r.Tasks, len(got))
	}
	if v := el.values(t, other.Pid()); !allEqual(v, -1) {
		t.Errorf("a task outside the selected container changed: %v", v)
	}
	sets := testutil.ToFloat64(m.Sets.WithLabelValues(numav1.ReasonApplied))
	if int(sets) < len(got) {
		t.Errorf("numapref_task_sets_total{result=Applied} = %v, want at least %d", sets, len(got))
	}
	if v := testutil.ToFloat64(m.Containers.WithLabelValues(numav1.ReasonApplied, "0")); v != 1 {
		t.Errorf("numapref_containers{reason=Applied,numa_node=0} = %v, want 1", v)
	}
	if v := testutil.ToFloat64(m.Tasks); int(v) != len(got) {
		t.Errorf("numapref_managed_tasks = %v, want %d", v, len(got))
	}
	if v := testutil.ToFloat64(m.Kernel.WithLabelValues(el.emu.Support().Backend)); v != 1 {
		t.Errorf("numapref_kernel_supported = %v, want 1", v)
	}
	if n := testutil.CollectAndCount(m.PassSeconds); n != 1 {
		t.Errorf("pass duration series = %d, want 1 (full)", n)
	}

	// A second pass with nothing new issues no SET: the emulator's state stays as it is.
	before := el.emu.Stats()
	e.Pass()
	if after := el.emu.Stats(); after != before {
		t.Errorf("an idle pass changed the kernel state: %+v -> %+v", before, after)
	}

	e.SetDesired(nil)
	e.Pass()
	if v := el.values(t, w.Pid()); !allEqual(v, -1) {
		t.Errorf("after undo, tasks have %v; want all -1", v)
	}
	if v := testutil.ToFloat64(m.Restores); int(v) < len(got) {
		t.Errorf("numapref_task_restores_total = %v, want at least %d", v, len(got))
	}
	if v := testutil.ToFloat64(m.Tasks); v != 0 {
		t.Errorf("numapref_managed_tasks after undo = %v, want 0", v)
	}
	if _, err := os.Stat(el.ledger); err != nil {
		t.Fatalf("ledger: %v", err)
	}
	l, err := readLedger(el.ledger)
	if err != nil || len(l) != 0 {
		t.Errorf("ledger after undo = %v, %v; want empty", l, err)
	}
}

func TestEngineUndoLeavesTheApplicationsOwnValue(t *testing.T) {
	el := newEngineLab(t)
	w, _, d := el.container(t, "a", 0, 3)
	e := el.engine(t)
	e.SetDesired([]desire.Desire{d})
	el.settle(t, e, w.Pid())

	tids, err := w.TIDs()
	if err != nil {
		t.Fatal(err)
	}
	own := tids[len(tids)-1]
	if err := el.emu.Set(own, 1); err != nil { // the application's own choice
		t.Fatal(err)
	}
	e.SetDesired(nil)
	e.Pass()
	got := el.values(t, w.Pid())
	for tid, v := range got {
		want := -1
		if tid == own {
			want = 1
		}
		if v != want {
			t.Errorf("task %d has %d after undo, want %d", tid, v, want)
		}
	}
}

func TestEngineUndoesAfterRestart(t *testing.T) {
	el := newEngineLab(t)
	w, _, d := el.container(t, "a", 0, 3)
	first := el.engine(t)
	first.SetDesired([]desire.Desire{d})
	if v := el.settle(t, first, w.Pid()); !allEqual(v, 0) {
		t.Fatalf("not applied: %v", v)
	}

	// The agent dies; its preference was deleted while it was down. The kernel (emulator
	// state dir) keeps the values, the ledger remembers them.
	el.emu.Close()
	el.openEmulator(t)
	second := el.engine(t)
	second.Pass() // not synced yet: must not undo what it has not read the desire of
	if v := el.values(t, w.Pid()); !allEqual(v, 0) {
		t.Fatalf("an unsynced engine changed tasks: %v", v)
	}
	second.SetDesired(nil)
	second.Pass()
	if v := el.values(t, w.Pid()); !allEqual(v, -1) {
		t.Errorf("after restart and undo, tasks have %v; want all -1", v)
	}
}

// dialForkReader opens the proc connector's socket, subscribed to forks, as the agent
// gives it to its engine (EngineConfig.ForkReader), until the test ends.
func dialForkReader(t testing.TB) *numa.ProcConn {
	t.Helper()
	pc, err := numa.DialProcConnector(numa.ProcEventFork)
	testenv.RequireNoError(t, err, "opening the proc connector (CAP_NET_ADMIN)", "sudo make host")
	t.Cleanup(func() { pc.Close() })
	return pc
}

// The engine reads the socket itself, as the agent wires it, filters it and places a
// container's forked children from their events alone.
func TestEngineCatchesForkedChildrenFromEvents(t *testing.T) {
	el := newEngineLab(t)
	w, _, d := el.container(t, "a", 0, 2)
	e := el.engineWith(t, EngineConfig{ForkReader: dialForkReader(t)})
	startEngine(t, e)
	e.SetDesired([]desire.Desire{d})
	waitFor(t, "the workload has node 0", func() bool { return allEqual(el.values(t, w.Pid()), 0) })

	// The rescan interval is an hour: only fork events can bring the children in.
	shell, forked, err := w.Fork()
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the forked children have node 0", func() bool {
		return allEqual(el.values(t, shell, forked), 0)
	})
}

// The kernel sends a fork event before the child joins its cgroup; a fork pass in that gap
// does not list the child. The engine looks again after ForkRetryDelays (here once, after
// 300 ms of its fake clock: the test closes the gap before it steps the clock) and places
// the child without waiting for the rescan (an hour).
func TestEngineLooksAgainForAChildNotYetInItsCgroup(t *testing.T) {
	el := newEngineLab(t)
	w, c, d := el.container(t, "a", 0, 1)
	events := make(chan numa.ProcEvent, 1)
	m := NewMetrics()
	fc := clocktesting.NewFakeClock(time.Now())
	e := el.engineWith(t, EngineConfig{ProcEvents: events, Metrics: m, Clock: fc,
		ForkRetryDelays: []time.Duration{300 * time.Millisecond}})
	startEngine(t, e)
	e.SetDesired([]desire.Desire{d})
	waitFor(t, "the workload has node 0", func() bool { return allEqual(el.values(t, w.Pid()), 0) })

	// The "child", still outside the container's cgroups when its fork event arrives.
	child := exec.Command("sleep", "60")
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { child.Process.Kill(); child.Wait() }()
	pid := child.Process.Pid
	events <- numa.ProcEvent{Kind: numa.ProcEventFork, ParentTGID: w.Pid(), ParentTID: w.Pid(), ChildTGID: pid, ChildTID: pid}
	// The rescan ticker and now the timer of the look again.
	waitFor(t, "the fork pass set a timer to look again", func() bool {
		return passStats(t, m, "fork").count == 1 && fc.Waiters() == 2
	})
	if v := el.values(t, pid); allEqual(v, 0) {
		t.Fatalf("the child has node 0 before the engine looked again: %v", v)
	}
	if err := c.Attach(pid); err != nil { // what cgroup_post_fork does, a little late
		t.Fatal(err)
	}
	fc.Step(300 * time.Millisecond)
	waitFor(t, "the late child has node 0", func() bool { return allEqual(el.values(t, pid), 0) })
	waitFor(t, "the look again's pass is counted", func() bool { return passStats(t, m, "fork").count >= 2 })
	if n := passStats(t, m, "fork").count; n != 2 {
		t.Errorf("%d fork passes, want 2 (the event's and one look again)", n)
	}
	if n := fc.Waiters(); n != 1 {
		t.Errorf("%d timers on the engine's clock after the look again listed the child, want 1 (the rescan ticker)", n)
	}
}

// Without fork events, the rescan is what brings a fork() child in: a tick of the
// engine's clock runs a full pass.
func TestEngineRescanCatchesForkedChildren(t *testing.T) {
	el := newEngineLab(t)
	w, _, d := el.container(t, "a", 0, 2)
	m := NewMetrics()
	fc := clocktesting.NewFakeClock(time.Now())
	e := el.engineWith(t, EngineConfig{RescanInterval: 10 * time.Second, Metrics: m, Clock: fc})
	startEngine(t, e)
	e.SetDesired([]desire.Desire{d})
	// A thread the Go runtime starts while a pass runs is only caught by the next one: tick
	// until the workload is placed.
	rescanUntil := func(what string, done func() bool) {
		t.Helper()
		waitFor(t, what, func() bool {
			if done() {
				return true
			}
			if passStats(t, m, "full").count > 0 {
				fc.Step(10 * time.Second)
			}
			return false
		})
	}
	rescanUntil("the workload has node 0", func() bool { return allEqual(el.values(t, w.Pid()), 0) })

	child, err := w.RawFork() // starts without the preference
	if err != nil {
		t.Fatal(err)
	}
	passes := passStats(t, m, "full").count
	rescanUntil("a rescan gave the child node 0", func() bool {
		return allEqual(el.values(t, child), 0) && passStats(t, m, "full").count > passes
	})
}

// getCounter counts the GETs the engine issues to a real backend.
type getCounter struct {
	prctl.Kernel
	gets atomic.Int32
}

func (k *getCounter) Get(tid int) (int, error) {
	k.gets.Add(1)
	return k.Kernel.Get(tid)
}

// A fork pass reads only the new task: the tasks the last pass applied are trusted until
// the next full pass. A fork event whose tid the last pass listed (a recycled pid) is read.
func TestEngineForkPassReadsOnlyNewTasks(t *testing.T) {
	el := newEngineLab(t)
	w, _, d := el.container(t, "a", 0, 4)
	k := &getCounter{Kernel: el.emu}
	e, err := NewEngine(EngineConfig{
		Resolver: el.resolver, Kernel: k, Support: el.emu.Support(), OnlineNodes: []int{0, 1},
		LedgerPath: el.ledger, RescanInterval: time.Hour, Log: testr.New(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	e.SetDesired([]desire.Desire{d})
	if v := el.settle(t, e, w.Pid()); !allEqual(v, 0) {
		t.Fatalf("not applied: %v", v)
	}
	e.Pass() // a pass that lists every task settled: the baseline for the fork passes
	before, err := w.TIDs()
	if err != nil {
		t.Fatal(err)
	}
	// A locked goroutine may take an idle thread of the runtime: ask until one is new.
	var after, fresh []int
	for i := 0; len(fresh) == 0 && i < 10; i++ {
		if err := w.Threads(1); err != nil {
			t.Fatal(err)
		}
		if after, err = w.TIDs(); err != nil {
			t.Fatal(err)
		}
		for _, tid := range after {
			if !slices.Contains(before, tid) {
				fresh = append(fresh, tid)
			}
		}
	}
	if len(fresh) == 0 {
		t.Fatal("no new thread")
	}
	key := d.Key()
	k.gets.Store(0)
	e.forkPass(key, &forkMark{tid: fresh[0]})
	// The new tasks: the asked-for thread, and any the Go runtime started meanwhile, never
	// the ones the last pass applied. (Exact counts would race with the runtime.)
	if got := int(k.gets.Load()); got < 1 || got >= len(after) {
		t.Errorf("fork pass issued %d GETs for %d new tasks of %d", got, len(fresh), len(after))
	}
	if v := el.values(t, w.Pid()); !allEqual(v, 0) {
		t.Errorf("after the fork pass: %v", v)
	}
	k.gets.Store(0)
	e.forkPass(key, &forkMark{tid: before[0]})
	if got := int(k.gets.Load()); got < 1 || got >= len(after) {
		t.Errorf("a fork event naming a listed tid: %d GETs of %d tasks, want that tid (and new ones) only", got, len(after))
	}
	k.gets.Store(0)
	e.Pass()
	if got := int(k.gets.Load()); got < len(after) {
		t.Errorf("full pass issued %d GETs for %d tasks: it must read every task", got, len(after))
	}
}

func TestEngineHonoursCpusetPinning(t *testing.T) {
	el := newEngineLab(t)
	w, c, d := el.container(t, "pinned", 1, 2)
	if err := c.SetMems("0"); err != nil {
		t.Fatal(err)
	}
	e := el.engine(t)
	e.SetDesired([]desire.Desire{d})
	e.Pass()
	if r := e.Results()[d.Key()]; r.Reason != numav1.ReasonMemoryPinnedElsewhere {
		t.Errorf("node 1 in a cpuset.mems=0 container: reason %q, want %s", r.Reason, numav1.ReasonMemoryPinnedElsewhere)
	}
	if v := el.values(t, w.Pid()); !allEqual(v, -1) {
		t.Errorf("pinned container's tasks changed: %v", v)
	}

	d.Node = 0
	e.SetDesired([]desire.Desire{d})
	v := el.settle(t, e, w.Pid())
	if r := e.Results()[d.Key()]; r.Reason != numav1.ReasonApplied {
		t.Errorf("node 0 in a cpuset.mems=0 container: reason %q (%s), want Applied", r.Reason, r.Message)
	}
	if !allEqual(v, 0) {
		t.Errorf("tasks have %v, want all 0", v)
	}
}

func TestEngineRecoversFromADamagedLedger(t *testing.T) {
	el := newEngineLab(t)
	w, _, d := el.container(t, "a", 0, 2)
	files.Write(t, el.ledger, `{"version":1,"containers":[{"podUID":`)
	e, err := NewEngine(EngineConfig{Resolver: el.resolver, Kernel: el.emu, Support: el.emu.Support(),
		OnlineNodes: []int{0, 1}, LedgerPath: el.ledger, Log: testr.New(t)})
	if err == nil {
		t.Error("NewEngine said nothing about a damaged ledger")
	}
	e.SetDesired([]desire.Desire{d})
	if v := el.settle(t, e, w.Pid()); !allEqual(v, 0) {
		t.Fatalf("not applied after a damaged ledger: %v", v)
	}
	if l, err := readLedger(el.ledger); err != nil || len(l) != 1 {
		t.Errorf("ledger not rebuilt: %v, %v", l, err)
	}
}

// countingKernel counts calls; the engine must make none without proven support.
type countingKernel struct{ calls int }

func (k *countingKernel) Get(int) (int, error) { k.calls++; return -1, nil }
func (k *countingKernel) Set(int, int) error   { k.calls++; return nil }

func TestEngineWithoutKernelSupportCallsNothing(t *testing.T) {
	el := newEngineLab(t)
	_, _, d := el.container(t, "a", 0, 1)
	k := &countingKernel{}
	e, err := NewEngine(EngineConfig{Resolver: el.resolver, Kernel: k,
		Support: numa.Support{Supported: false, Reason: "no numa_preferred_nid_force line"}, OnlineNodes: []int{0}})
	if err != nil {
		t.Fatal(err)
	}
	missing := d
	missing.PodUID, missing.Container = "other", "x"
	missing.Node = 7
	e.SetDesired([]desire.Desire{d, missing})
	e.Pass()
	if k.calls != 0 {
		t.Errorf("%d kernel calls without support, want 0", k.calls)
	}
	got := []string{e.Results()[d.Key()].Reason, e.Results()[missing.Key()].Reason}
	if want := []string{numav1.ReasonKernelUnsupported, numav1.ReasonKernelUnsupported}; !slices.Equal(got, want) {
		t.Errorf("reasons %v, want %v", got, want)
	}
}

func TestEngineNodeNotPresent(t *testing.T) {
	el := newEngineLab(t)
	w, _, d := el.container(t, "a", 3, 1)
	e := el.engine(t)
	e.SetDesired([]desire.Desire{d})
	e.Pass()
	if r := e.Results()[d.Key()]; r.Reason != numav1.ReasonNodeNotPresent {
		t.Errorf("reason %q, want NodeNotPresent", r.Reason)
	}
	if v := el.values(t, w.Pid()); !allEqual(v, -1) {
		t.Errorf("tasks changed: %v", v)
	}
}

func TestEngineFollowsARestartedContainer(t *testing.T) {
	el := newEngineLab(t)
	old, _, d := el.container(t, "a", 0, 2)
	e := el.engine(t)
	e.SetDesired([]desire.Desire{d})
	el.settle(t, e, old.Pid())

	// The kubelet restarts the container: same pod and name, a new container ID and cgroup.
	old.Stop()
	c, err := el.lab.Container(d.Ref.QOS, d.Ref.PodUID, strings.Repeat("ef", 32))
	if err != nil {
		t.Fatal(err)
	}
	w, err := c.StartWorkload(2)
	if err != nil {
		t.Fatal(err)
	}
	d.Ref.ContainerID = c.ContainerID
	e.SetDesired([]desire.Desire{d})
	if v := el.settle(t, e, w.Pid()); !allEqual(v, 0) {
		t.Fatalf("restarted container not applied: %v", v)
	}
	e.SetDesired(nil)
	e.Pass()
	if v := el.values(t, w.Pid()); !allEqual(v, -1) {
		t.Errorf("restarted container not undone: %v", v)
	}
}

// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build host && linux

package nodeagent

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
	"github.com/numapref/numapref/internal/fsutil"
	"github.com/numapref/numapref/internal/nodeagent/cgroups"
	"github.com/numapref/numapref/internal/nodeagent/desire"
	"github.com/numapref/numapref/internal/numa"
	"github.com/numapref/numapref/internal/numa/emulator"
	"github.com/numapref/numapref/internal/numa/prctl"
	"github.com/numapref/numapref/internal/testutil/hostlab"
	"github.com/numapref/numapref/internal/testutil/testenv"
)

// Benchmarks of the apply engine on real lab cgroups and real multi-threaded processes
// (needs root, like the engine tests). See BENCHMARKS.md for the commands and figures.
//
// BenchmarkEnginePass times one steady-state full pass (every task already at its node:
// no SET, no ledger write) against BareFloor, the least any pass must do: read each
// container's cgroup.procs and tasks (cgroup.threads on v2), list each process's
// /proc/<pid>/task, and GET every task, with the same kernel backend. Two backends:
//
//   - emulator: the kernel emulator this host needs (state on tmpfs, as the agent's
//     --emulator-state-dir default /run/numapref/emulator is); its GET reads /proc files.
//   - prctlfake: a prctl.Kernel answering from a map, standing for prctl(PR_PREFERRED_NID)
//     (~1.6 µs a call on a patched kernel) without modelling that cost, so the engine's own
//     overhead shows. prctl.Prctl's system call can only be replaced inside package prctl.
//
// BenchmarkForkToApplied times how long a fork()ed child of a container's process runs
// before the emulator reports it at the container's node, with proc-connector fork events
// and with rescans only.

// passBench is a lab of containers for the pass benchmarks.
type passBench struct {
	lab      *hostlab.Lab
	resolver *cgroups.Resolver
	emu      *emulator.Emulator
	desires  []desire.Desire
	cgroups  []*cgroups.Container
	loads    []*hostlab.Workload
	emuDir   string // the emulator's state
}

// benchStateDir returns a fresh directory on tmpfs when there is one, else on disk.
func benchStateDir(b *testing.B) string {
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		if dir, err := os.MkdirTemp("/dev/shm", "numapref-enginebench-"); err == nil {
			b.Cleanup(func() { os.RemoveAll(dir) })
			return dir
		}
	}
	return b.TempDir()
}

func newPassBench(b *testing.B, containers, threads int) *passBench {
	b.Helper()
	testenv.RequireRoot(b) // real cgroups, real processes
	lab, err := hostlab.New("/sys/fs/cgroup")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if err := lab.Close(); err != nil {
			b.Error(err)
		}
	})
	r, err := cgroups.NewResolver("/", cgroups.ResolverOptions{Driver: cgroups.DriverCgroupfs, KubeletCgroupRoot: lab.KubeletCgroupRoot()})
	if err != nil {
		b.Fatal(err)
	}
	sys := b.TempDir()
	if err := os.MkdirAll(filepath.Join(sys, "devices/system/node"), 0o755); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(sys, "devices/system/node/possible"), []byte("0-1\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	emuDir := benchStateDir(b)
	emu, err := emulator.New(emulator.Options{StateDir: emuDir, ProcRoot: "/proc", SysRoot: sys, ForkEvents: true})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { emu.Close() })
	pb := &passBench{lab: lab, resolver: r, emu: emu, emuDir: emuDir}
	for i := range containers {
		w, d := benchContainer(b, lab, fmt.Sprintf("%s-%d", b.Name(), i), threads)
		cg, err := r.Resolve(d.Ref)
		if err != nil {
			b.Fatal(err)
		}
		pb.desires = append(pb.desires, d)
		pb.cgroups = append(pb.cgroups, cg)
		pb.loads = append(pb.loads, w)
	}
	return pb
}

// benchContainer makes a lab container running a workload with threads extra threads, and
// the desire that asks for node 0 (this host's only node: every cpuset holds it).
func benchContainer(b *testing.B, lab *hostlab.Lab, name string, threads int) (*hostlab.Workload, desire.Desire) {
	b.Helper()
	podUID, c, w, err := lab.NamedWorkload(corev1.PodQOSBurstable, name, threads)
	if err != nil {
		b.Fatal(err)
	}
	d := desire.Desire{Pod: types.NamespacedName{Namespace: "ns", Name: name}, PodUID: types.UID(podUID), Container: "main",
		Ref: cgroups.ContainerRef{PodUID: podUID, QOS: corev1.PodQOSBurstable, ContainerID: c.ContainerID}, Node: 0, Preference: "pref"}
	return w, d
}

// withPlacement returns the desires with placement mode: Static keeps node 0; Spread puts
// every pod in one group of equal weights.
func withPlacement(ds []desire.Desire, mode numav1.PlacementMode) []desire.Desire {
	out := slices.Clone(ds)
	for i := range out {
		out[i].Placement = desire.Placement{Mode: mode}
		if mode == numav1.PlacementModeSpread {
			out[i].Node = numa.NoNode
			out[i].Placement.Group, out[i].Placement.Weight = "NumaPreference ns/pref", 1000
		}
	}
	return out
}

// mapKernel stands for prctl.Prctl on a patched kernel with its system call costing
// nothing: values live in a map, a task never seen holds -1.
type mapKernel struct{ vals map[int]int }

func (k *mapKernel) Get(tid int) (int, error) {
	if v, ok := k.vals[tid]; ok {
		return v, nil
	}
	return numa.NoNode, nil
}

func (k *mapKernel) Set(tid, nid int) error { k.vals[tid] = nid; return nil }

func BenchmarkEnginePass(b *testing.B) {
	for _, size := range []struct{ containers, threads int }{{20, 50}, {100, 10}, {100, 50}} {
		b.Run(fmt.Sprintf("containers=%d,threads=%d", size.containers, size.threads), func(b *testing.B) {
			pb := newPassBench(b, size.containers, size.threads)
			static := pb.desires
			for _, placement := range []numav1.PlacementMode{numav1.PlacementModeStatic, numav1.PlacementModeSpread} {
				// Spread: one group of every container's pod, chosen by the engine on each pass
				// (this host's cpusets hold node 0 only, so every pod lands there).
				pb.desires = withPlacement(static, placement)
				for _, backend := range []string{"emulator", "prctlfake"} {
					var kernel prctl.Kernel = pb.emu
					if backend == "prctlfake" {
						kernel = &mapKernel{vals: map[int]int{}}
					}
					b.Run(fmt.Sprintf("placement=%s/kernel=%s", placement, backend), func(b *testing.B) { pb.run(b, kernel) })
				}
			}
			pb.desires = static
		})
	}
}

// run settles an engine on kernel, checks the steady state, and times a pass and the
// bare floor against each other.
func (pb *passBench) run(b *testing.B, kernel prctl.Kernel) {
	m := NewMetrics()
	e, err := NewEngine(EngineConfig{
		Resolver: pb.resolver, Kernel: kernel, Support: numa.Support{Supported: true, Backend: "bench"},
		OnlineNodes: []int{0, 1}, LedgerPath: filepath.Join(b.TempDir(), "ledger.json"),
		RescanInterval: time.Hour, Metrics: m, Log: logr.Discard(),
	})
	if err != nil {
		b.Fatal(err)
	}
	e.SetDesired(pb.desires)
	sets := func() float64 { return testutil.ToFloat64(m.Sets.WithLabelValues(numav1.ReasonApplied)) }
	// Passes until one issues no SET (a thread the Go runtime of a workload starts while a
	// pass runs is caught by the next).
	settled := false
	for range 20 {
		before := sets()
		e.Pass()
		if sets() == before {
			settled = true
			break
		}
	}
	if !settled {
		b.Fatal("the engine still issues SETs after 20 passes")
	}
	total := pb.checkSteady(b, e, kernel)

	var passNs, floorNs float64
	b.Run("loop=Pass", func(b *testing.B) {
		before := sets()
		for b.Loop() {
			e.Pass()
		}
		if n := sets() - before; n != 0 {
			b.Fatalf("%v SETs during the timed passes: not a steady state", n)
		}
		passNs = report(b, total)
	})
	b.Run("loop=BareFloor", func(b *testing.B) {
		fl := pb.floor()
		for b.Loop() {
			if n := fl.run(kernel); n != total {
				b.Fatalf("bare floor: %d tasks at node 0, want %d", n, total)
			}
		}
		floorNs = report(b, total)
	})
	if passNs > 0 && floorNs > 0 {
		b.Logf("pass/floor = %.2f× (%d tasks)", passNs/floorNs, total)
	}
	pb.checkSteady(b, e, kernel)
}

// report adds tasks/op and ns/task and returns ns/op.
func report(b *testing.B, tasks int) float64 {
	ns := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
	b.ReportMetric(float64(tasks), "tasks/op")
	b.ReportMetric(ns/float64(tasks), "ns/task")
	return ns
}

// checkSteady asserts what the timings assume: every container Applied, every listed task
// at node 0 in kernel, and the results count them. It returns the number of tasks.
func (pb *passBench) checkSteady(b *testing.B, e *Engine, kernel prctl.Kernel) int {
	b.Helper()
	results := e.Results()
	total := 0
	for i, d := range pb.desires {
		r := results[d.Key()]
		tasks, err := pb.resolver.ListTIDs(pb.cgroups[i])
		if err != nil {
			b.Fatal(err)
		}
		if r.Reason != numav1.ReasonApplied || r.Tasks != len(tasks) || len(r.Failed) != 0 {
			b.Fatalf("container %d: %s (%s) with %d tasks, failed %v; want Applied with %d", i, r.Reason, r.Message, r.Tasks, r.Failed, len(tasks))
		}
		for _, t := range tasks {
			if v, err := kernel.Get(t.TID); err != nil || v != 0 {
				b.Fatalf("task %d of container %d: node %d, %v; want 0", t.TID, i, v, err)
			}
		}
		total += len(tasks)
	}
	return total
}

// floorLoop is the bare loop: the cgroup files and task directories every pass must read,
// and one GET per task, nothing else.
type floorLoop struct {
	procs, threads []string // per container
	buf            *[]byte
	ids            []int
}

func (pb *passBench) floor() *floorLoop {
	threadsFile := "tasks"
	if pb.resolver.Layout().Version == 2 {
		threadsFile = "cgroup.threads"
	}
	fl := &floorLoop{buf: new([]byte)}
	*fl.buf = make([]byte, 0, 8192)
	for _, cg := range pb.cgroups {
		fl.procs = append(fl.procs, filepath.Join(cg.TasksDir, "cgroup.procs"))
		fl.threads = append(fl.threads, filepath.Join(cg.TasksDir, threadsFile))
	}
	return fl
}

// run returns how many tasks hold node 0.
func (fl *floorLoop) run(kernel prctl.Kernel) int {
	n := 0
	for i := range fl.procs {
		data, err := fsutil.ReadFileInto(fl.procs[i], fl.buf)
		if err != nil {
			return -1
		}
		pids, ok := parseIDs(data, fl.ids[:0])
		if !ok {
			return -1
		}
		for _, pid := range pids {
			if _, err := numa.ListThreads("/proc", pid); err != nil {
				return -1
			}
		}
		if data, err = fsutil.ReadFileInto(fl.threads[i], fl.buf); err != nil {
			return -1
		}
		tids, ok := parseIDs(data, pids[:0])
		if !ok {
			return -1
		}
		for _, tid := range tids {
			if v, err := kernel.Get(tid); err == nil && v == 0 {
				n++
			}
		}
		fl.ids = tids
	}
	return n
}

// parseIDs appends the ids of a cgroup.procs, cgroup.threads or tasks file to dst, as
// tightly as the resolver's own parser (one decimal id a line).
func parseIDs(data []byte, dst []int) ([]int, bool) {
	id, digits := 0, 0
	for _, c := range data {
		switch {
		case c >= '0' && c <= '9':
			id, digits = id*10+int(c-'0'), digits+1
		case c == '\n' && digits > 0:
			dst, id, digits = append(dst, id), 0, 0
		default:
			return dst, false
		}
	}
	if digits > 0 {
		dst = append(dst, id)
	}
	return dst, true
}

// BenchmarkForkToApplied: a container's process forks (the workload execs a shell, a
// CLONE_VM child, which fork()s a sleep); the time until the emulator reports both at the
// container's node. fork→applied runs from the fork request to the workload (an upper
// bound: it includes the shell's exec); reply→applied from the workload's answer, when
// the sleep has been forked (a lower bound). Children are killed between iterations.
func BenchmarkForkToApplied(b *testing.B) {
	// The agent's ledger lives on disk (--state-dir /var/lib/numapref) and every write
	// fsyncs; ledger=tmpfs shows what those writes cost.
	b.Run("mode=events,ledger=disk", func(b *testing.B) { benchForkToApplied(b, true, time.Hour, false) })
	b.Run("mode=events,ledger=tmpfs", func(b *testing.B) { benchForkToApplied(b, true, time.Hour, true) })
	b.Run("mode=rescan100ms,ledger=disk", func(b *testing.B) { benchForkToApplied(b, false, 100*time.Millisecond, false) })
}

func benchForkToApplied(b *testing.B, events bool, rescan time.Duration, ledgerOnTmpfs bool) {
	pb := newPassBench(b, 1, 10)
	ledgerDir := b.TempDir()
	if ledgerOnTmpfs {
		ledgerDir = benchStateDir(b)
	}
	m := NewMetrics()
	kernel := &timedKernel{k: pb.emu}
	var ch <-chan numa.ProcEvent
	if events {
		ch = openProcEvents(b).Events()
	}
	e, err := NewEngine(EngineConfig{
		Resolver: pb.resolver, Kernel: kernel, Support: pb.emu.Support(), OnlineNodes: []int{0, 1},
		LedgerPath: filepath.Join(ledgerDir, "ledger.json"), RescanInterval: rescan, ProcEvents: ch, Metrics: m, Log: logr.Discard(),
	})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() { runEngine(b, ctx, e); close(stopped) }()
	defer func() { cancel(); <-stopped }() // before the emulator closes (b.Cleanup)
	e.SetDesired(pb.desires)
	atNode := func(tids ...int) bool {
		for _, tid := range tids {
			if v, err := pb.emu.Get(tid); err != nil || v != 0 {
				return false
			}
		}
		return true
	}
	wl := pb.loads[0]
	deadline := time.Now().Add(10 * time.Second)
	for {
		tids, err := wl.TIDs()
		if err != nil {
			b.Fatal(err)
		}
		if atNode(tids...) {
			break
		}
		if time.Now().After(deadline) {
			b.Fatal("the workload never reached node 0")
		}
		time.Sleep(time.Millisecond)
	}

	var forkToApplied, replyToApplied []time.Duration
	passesBefore := passStats(b, m, "fork")
	stagesBefore := map[string]histStats{}
	for _, stage := range forkStageNames {
		stagesBefore[stage] = stageStats(b, m, stage)
	}
	getBefore, setBefore := kernel.getNs.Load(), kernel.setNs.Load()
	b.ResetTimer()
	for range b.N {
		if !events {
			// Fork at a random phase of the rescan ticker, as a real fork is; iterations
			// would otherwise lock onto the tick that ended the previous one.
			b.StopTimer()
			time.Sleep(time.Duration(rand.Int64N(int64(rescan))))
			b.StartTimer()
		}
		t0 := time.Now()
		shell, forked, err := wl.Fork()
		if err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		for !atNode(forked, shell) {
			if time.Since(t0) > 10*time.Second {
				b.Fatalf("forked children %d, %d never reached node 0", shell, forked)
			}
			time.Sleep(100 * time.Microsecond)
		}
		t2 := time.Now()
		forkToApplied = append(forkToApplied, t2.Sub(t0))
		replyToApplied = append(replyToApplied, t2.Sub(t1))
		b.StopTimer()
		syscall.Kill(forked, syscall.SIGKILL) // the shell's wait returns and it exits
		for hostlab.Running(forked) || hostlab.Running(shell) {
			time.Sleep(time.Millisecond)
		}
		b.StartTimer()
	}
	b.StopTimer()
	reportPercentiles(b, "fork→applied", forkToApplied)
	reportPercentiles(b, "reply→applied", replyToApplied)
	if events {
		after := passStats(b, m, "fork")
		if n := after.count - passesBefore.count; n > 0 {
			b.ReportMetric(float64(n)/float64(b.N), "forkpasses/op")
			b.ReportMetric((after.sum-passesBefore.sum)/float64(n)*1000, "forkpass-mean-ms")
			b.ReportMetric(float64(kernel.getNs.Load()-getBefore)/float64(n)/1e6, "forkpass-get-ms")
			b.ReportMetric(float64(kernel.setNs.Load()-setBefore)/float64(n)/1e6, "forkpass-set-ms")
		}
		// Where the lag of the forks their own event's pass set goes (fork.go's stages).
		for _, stage := range forkStageNames {
			st := stageStats(b, m, stage)
			if n := st.count - stagesBefore[stage].count; n > 0 {
				b.ReportMetric((st.sum-stagesBefore[stage].sum)/float64(n)*1000, "stage-"+stage+"-mean-ms")
			}
		}
	}
}

// timedKernel adds up the time the engine spends in its kernel backend.
type timedKernel struct {
	k            prctl.Kernel
	getNs, setNs atomic.Int64
}

func (t *timedKernel) Get(tid int) (int, error) {
	start := time.Now()
	v, err := t.k.Get(tid)
	t.getNs.Add(int64(time.Since(start)))
	return v, err
}

func (t *timedKernel) Set(tid, nid int) error {
	start := time.Now()
	err := t.k.Set(tid, nid)
	t.setNs.Add(int64(time.Since(start)))
	return err
}

func reportPercentiles(b *testing.B, name string, ds []time.Duration) {
	slices.Sort(ds)
	pct := func(p float64) float64 {
		i := int(p*float64(len(ds))+0.999999) - 1
		return float64(ds[max(0, min(i, len(ds)-1))].Microseconds()) / 1000
	}
	b.ReportMetric(pct(0.50), name+"-p50-ms")
	b.ReportMetric(pct(0.99), name+"-p99-ms")
}

// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build host && linux

package nodeagent

import (
	"context"

	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"

	"github.com/numapref/numapref/internal/numa"
	"github.com/numapref/numapref/internal/numa/prctl"
	"github.com/numapref/numapref/internal/testutil/hostlab"
)

// BenchmarkForkStorm times fork→applied of a selected container's raw fork() children
// while a process in no container forks 1,000 times a second, the engine wired as the
// agent wires it: the proc connector's socket read by the engine (fork events only, the
// kernel's filter of forks kept by the engine), the ledger on disk. Each op is one raw
// fork of the selected workload, timed from the request until the kernel backend holds
// the child at node 0; the child is killed between ops (untimed).
//
//   - kernel=emulator: the emulator the agent runs on this host, in this process as in
//     the agent's (its listener takes every fork of the host); placed is read from its
//     state files, as the workload's side reads it (test/forkcost).
//   - kernel=standin: an in-process stand-in for the patched kernel's prctl (a map under
//     a lock), used only here: it costs nothing and tells the waiting op at once, so the
//     process's CPU per op is the engine's own (the proc connector's reader, the fork
//     pass, the ledger) with the benchmark's small share (its request to the workload,
//     the child's kill). That is the agent's CPU per selected fork, the emulator's share
//     excluded.
//   - kernel=none: the same with nothing selected, each op a raw fork and nothing to wait
//     for: the CPU per op of the benchmark's own part (and of an agent that has nothing
//     to do), which standin's less this is the agent's.
//
// It reports fork→applied p50 and p99 from the workload's side (from the request, so the
// raw fork's own time is in it), the agent's own lag since the kernel's event to the SET's
// return and each stage of it (mean, p50, p99: the values numapref_fork_apply_{lag,
// stage}_seconds observe, exactly), and the process's CPU per op.
func BenchmarkForkStorm(b *testing.B) {
	for _, backend := range []string{"emulator", "standin", "none"} {
		b.Run("rate=1000/kernel="+backend, func(b *testing.B) { benchForkStorm(b, 1000, backend) })
	}
}

func benchForkStorm(b *testing.B, rate int, backend string) {
	pb := newPassBench(b, 1, 10)
	m := NewMetrics()
	var kernel prctl.Kernel = pb.emu
	var placed func(pid int) <-chan struct{}
	switch backend {
	case "standin":
		pb.emu.Close() // its listener would take every fork of the storm
		k := newStandinKernel()
		kernel, placed = k, func(pid int) <-chan struct{} { return k.atNode(pid, 0) }
	case "none":
		pb.emu.Close()
		pb.desires = nil
		kernel, placed = newStandinKernel(), func(int) <-chan struct{} { return closed }
	default:
		placed = func(pid int) <-chan struct{} { return pollEmulated(pb.emuDir, pid) }
	}
	var mu sync.Mutex
	var agentLags []time.Duration
	stages := make([][]time.Duration, len(forkStageNames))
	cfg := EngineConfig{
		Resolver: pb.resolver, Kernel: kernel, Support: numa.Support{Supported: true, Backend: backend}, OnlineNodes: []int{0, 1},
		LedgerPath: filepath.Join(b.TempDir(), "ledger.json"), RescanInterval: time.Hour,
		ForkReader: dialForkReader(b), Metrics: m, Log: logr.Discard(),
	}
	record := false // only the timed forks'
	cfg.hooks.forkSet = func(lag time.Duration, st [6]time.Duration, ok bool) {
		mu.Lock()
		defer mu.Unlock()
		if !record || lag == 0 || !ok {
			return
		}
		agentLags = append(agentLags, lag)
		for i := range st {
			stages[i] = append(stages[i], st[i])
		}
	}
	e, err := NewEngine(cfg)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() { runEngine(b, ctx, e); close(stopped) }()
	defer func() { cancel(); <-stopped }() // before the emulator closes (b.Cleanup)
	e.SetDesired(pb.desires)
	wl := pb.loads[0]
	select {
	case <-placed(wl.Pid()):
	case <-time.After(10 * time.Second):
		b.Fatal("the workload never reached node 0")
	}

	storm, err := hostlab.StartStorm(rate, time.Hour, false)
	if err != nil {
		b.Fatal(err)
	}
	defer storm.Stop()
	time.Sleep(500 * time.Millisecond) // the storm at its rate, the filter's mark past it
	mu.Lock()
	record = true
	mu.Unlock()
	var lags []time.Duration
	var cpu time.Duration
	b.ResetTimer()
	for range b.N {
		cpu0 := processCPU()
		t0 := time.Now()
		child, err := wl.RawFork()
		if err != nil {
			b.Fatal(err)
		}
		select {
		case <-placed(child):
		case <-time.After(10 * time.Second):
			b.Fatalf("forked child %d never reached node 0", child)
		}
		lags = append(lags, time.Since(t0))
		cpu += processCPU() - cpu0
		b.StopTimer()
		syscall.Kill(child, syscall.SIGKILL)
		for hostlab.Running(child) {
			time.Sleep(time.Millisecond)
		}
		b.StartTimer()
	}
	b.StopTimer()
	reportPercentiles(b, "fork→applied", lags)
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/op")
	mu.Lock()
	defer mu.Unlock()
	b.ReportMetric(float64(len(agentLags))/float64(b.N), "ownpass-sets/op")
	if len(agentLags) == 0 {
		return
	}
	reportPercentiles(b, "agent-lag", agentLags)
	for i, stage := range forkStageNames {
		var sum time.Duration
		for _, d := range stages[i] {
			sum += d
		}
		b.ReportMetric(float64(sum.Microseconds())/float64(len(stages[i]))/1000, "stage-"+stage+"-mean-ms")
		reportPercentiles(b, "stage-"+stage, stages[i])
	}
}

// closed is a closed channel.
var closed = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// processCPU is this process's CPU time so far (user and system, every thread).
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// pollEmulated is closed once the emulator whose state is in dir holds node 0 for pid,
// polled every 100 µs from the state files (as the workload's side reads them), for at
// most 10 s.
func pollEmulated(dir string, pid int) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		taskDir := filepath.Join(dir, "proc", strconv.Itoa(pid), "task")
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Microsecond) {
			if s, err := numa.ReadSchedNUMA(taskDir, pid); err == nil && s.PreferredNIDForce == 0 {
				close(done)
				return
			}
		}
	}()
	return done
}

// standinKernel stands for the patched kernel's prctl in a benchmark: values in a map
// under a lock, a task never set holding -1 (a fork() child's value), and a channel per
// task a benchmark waits on.
type standinKernel struct {
	mu    sync.Mutex
	vals  map[int]int
	waits map[int]standinWait
}

type standinWait struct {
	node int
	ch   chan struct{}
}

func newStandinKernel() *standinKernel {
	return &standinKernel{vals: map[int]int{}, waits: map[int]standinWait{}}
}

func (k *standinKernel) Get(tid int) (int, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if v, ok := k.vals[tid]; ok {
		return v, nil
	}
	return numa.NoNode, nil
}

func (k *standinKernel) Set(tid, nid int) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.vals[tid] = nid
	if w, ok := k.waits[tid]; ok && w.node == nid {
		close(w.ch)
		delete(k.waits, tid)
	}
	return nil
}

// atNode is closed once tid holds node.
func (k *standinKernel) atNode(tid, node int) <-chan struct{} {
	k.mu.Lock()
	defer k.mu.Unlock()
	ch := make(chan struct{})
	if v, ok := k.vals[tid]; ok && v == node {
		close(ch)
		return ch
	}
	k.waits[tid] = standinWait{node: node, ch: ch}
	return ch
}

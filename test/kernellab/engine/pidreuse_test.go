// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build linux && kernellab

package engine

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"golang.org/x/sys/unix"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
	"github.com/numapref/numapref/internal/nodeagent"
	"github.com/numapref/numapref/internal/nodeagent/desire"
	"github.com/numapref/numapref/internal/numa"
	"github.com/numapref/numapref/internal/numa/prctl"
	"github.com/numapref/numapref/test/kernellab/labenv"
)

// PID reuse with real wraparound. With kernel.pid_max at pidReuseMax, three
// churners fork pidReuseChildren short-lived children each (fewer if pidReuseFor runs out
// first: TCG on a loaded host is slow): one in container A (node 1),
// one in B (node 0), one in C (not selected), while the engine runs on the real prctl with
// fork events and fast rescans. Pids wrap around many times over, so a tid the engine
// listed in A may name a task of B or C by the time it issues the SET. The test asserts
// that no value landed on the wrong task:
//
//   - every child reports (its exit status) the values it read on itself while it lived:
//     A's never node 0, B's never node 1, C's never anything but -1;
//   - every SET the engine issued found its target, right after, in the container whose
//     node it set (a live, non-exiting task; an exiting one cannot be attributed);
//   - afterwards, every live task outside A and B holds -1, and none in A or B holds the
//     other's node;
//   - and wraparound happened: some pid was handed to two children.
//
// It prints one line,
//
//	pidreuse pid_max=1024 churned=1500 reused_pids=180 wraps=20 fork_retries=0 applied_children=400 misapplied=0 sets=700 wrong_sets=0 unattributed_sets=280 live_checked=66 churn_s=40.0
const (
	pidReuseMax      = 1024
	pidReuseChildren = 500 // per churner
	pidReuseParallel = 4
	pidReuseRounds   = 4
	pidReuseSleep    = 3 * time.Millisecond
	pidReuseRescan   = 50 * time.Millisecond
	pidReuseFor      = 40 * time.Second
	pidReuseDeadline = 120 * time.Second
)

// setAudit wraps the real prctl and checks each SET the engine makes of a node: right
// after it, the target must be in the cgroup of the container that desires that node.
type setAudit struct {
	prctl.Kernel
	cgroupOf map[int]string // node → its container's cgroup path (as /proc/<pid>/cgroup names it)
	mu       sync.Mutex
	sets     int
	wrong    []string
	unknown  int // targets exiting or gone right after the SET: not attributable
}

func (a *setAudit) Set(tid, nid int) error {
	err := a.Kernel.Set(tid, nid)
	if err != nil || nid == numa.NoNode {
		return err
	}
	where, ok := liveCgroup(tid)
	a.mu.Lock()
	defer a.mu.Unlock()
	a.sets++
	switch {
	case !ok:
		a.unknown++
	case where != a.cgroupOf[nid]:
		a.wrong = append(a.wrong, fmt.Sprintf("SET %d on task %d in %s", nid, tid, where))
	}
	return err
}

// liveCgroup returns the cgroup v2 path of task tid if it is alive and not exiting: the
// cgroup file is read first and the stat after, so that the flag vouches for the path.
func liveCgroup(tid int) (string, bool) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", tid))
	if err != nil {
		return "", false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", tid))
	if err != nil {
		return "", false
	}
	s := string(stat)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:]) // f[0] state, f[6] flags
	if len(f) < 7 {
		return "", false
	}
	flags, err := strconv.ParseUint(f[6], 10, 64)
	if err != nil || flags&0x4 != 0 { // PF_EXITING
		return "", false
	}
	path, ok := strings.CutPrefix(strings.TrimSpace(string(data)), "0::")
	return path, ok
}

func TestPIDReuseWraparound(t *testing.T) {
	labenv.RequireKernel(t, "patched")
	p, sup := prctl.New(prPreferredNID, "/proc")
	if !sup.Supported {
		t.Fatalf("the patched kernel does not prove PR_PREFERRED_NID: %+v", sup)
	}
	l := newLab(t)
	cA, wA, dA := l.containerWith(t, "a", "", 1, 1)
	cB, wB, dB := l.containerWith(t, "b", "", 0, 1)
	cC, wC, _ := l.containerWith(t, "c", "", 0, 1)
	paths := map[string]string{}
	for name, pid := range map[string]int{"a": wA.Pid(), "b": wB.Pid(), "c": wC.Pid()} {
		where, ok := liveCgroup(pid)
		if !ok {
			t.Fatalf("reading the cgroup of workload %s (%d)", name, pid)
		}
		paths[name] = where
	}

	// The churners, one a container, waiting for their order.
	churners := map[string]*churner{}
	for name, c := range map[string]interface{ Attach(int) error }{"a": cA, "b": cB, "c": cC} {
		ch, err := startChurner()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(ch.stop)
		if err := c.Attach(ch.pid()); err != nil {
			t.Fatal(err)
		}
		churners[name] = ch
	}

	pe, err := numa.OpenProcEvents()
	if err != nil {
		t.Fatalf("opening the proc connector: %v", err)
	}
	defer pe.Close()
	audit := &setAudit{Kernel: p, cgroupOf: map[int]string{1: paths["a"], 0: paths["b"]}}
	e, err := nodeagent.NewEngine(nodeagent.EngineConfig{
		Resolver: l.resolver, Kernel: audit, Support: sup, OnlineNodes: l.online,
		LedgerPath: t.TempDir() + "/ledger.json", RescanInterval: pidReuseRescan, ProcEvents: pe.Events(), Log: logr.Discard(),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() { _ = e.Start(ctx); close(stopped) }()
	stopEngine := sync.OnceFunc(func() { cancel(); <-stopped })
	defer stopEngine()
	e.SetDesired([]desire.Desire{dA, dB})
	waitFor(t, "A and B are Applied", func() bool {
		r := e.Results()
		return r[dA.Key()].Reason == numav1.ReasonApplied && r[dB.Key()].Reason == numav1.ReasonApplied
	})

	oldMax, err := os.ReadFile("/proc/sys/kernel/pid_max")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile("/proc/sys/kernel/pid_max", []byte(strconv.Itoa(pidReuseMax)), 0); err != nil {
		t.Fatalf("setting kernel.pid_max to %d: %v", pidReuseMax, err)
	}
	restored := false
	restore := func() {
		if !restored {
			restored = true
			if err := os.WriteFile("/proc/sys/kernel/pid_max", oldMax, 0); err != nil {
				t.Errorf("restoring kernel.pid_max to %s: %v", strings.TrimSpace(string(oldMax)), err)
			}
		}
	}
	defer restore()

	start := time.Now()
	order := churnOrder{Children: pidReuseChildren, Parallel: pidReuseParallel, Rounds: pidReuseRounds,
		Sleep: pidReuseSleep, Prctl: true, Option: prPreferredNID, For: pidReuseFor}
	for _, ch := range churners {
		if err := ch.start(order); err != nil {
			t.Fatal(err)
		}
	}
	type outcome struct {
		name string
		res  churnResult
		err  error
	}
	results := make(chan outcome, len(churners))
	for name, ch := range churners {
		go func() {
			res, err := ch.result()
			results <- outcome{name, res, err}
		}()
	}
	byName := map[string]churnResult{}
	deadline := time.After(pidReuseDeadline)
	for range churners {
		select {
		case o := <-results:
			if o.err != nil {
				t.Fatalf("churner %s: %v", o.name, o.err)
			}
			byName[o.name] = o.res
		case <-deadline:
			t.Fatalf("the churners did not finish within %v", pidReuseDeadline)
		}
	}
	churnTime := time.Since(start)
	restore()

	// What the children saw of themselves.
	forbidden := map[string]int{"a": sawNode0 | sawOther, "b": sawNode1 | sawOther, "c": sawNode0 | sawNode1 | sawOther}
	own := map[string]int{"a": sawNode1, "b": sawNode0}
	seen := map[int]int{}
	var churned, applied, misapplied, killed, retries, wraps int
	for _, name := range []string{"a", "b", "c"} {
		res := byName[name]
		retries += res.ForkRetries
		for i, code := range res.Codes {
			churned++
			seen[res.Pids[i]]++
			if i > 0 && res.Pids[i] < res.Pids[i-1] {
				wraps++
			}
			switch {
			case code < 0:
				killed++
			case code&forbidden[name] != 0:
				misapplied++
				if misapplied <= 10 {
					t.Errorf("container %s: child %d saw a value not its container's (status %#x)", name, res.Pids[i], code)
				}
			case code&own[name] != 0:
				applied++
			}
		}
	}
	var reused int
	for _, n := range seen {
		if n > 1 {
			reused++
		}
	}
	if killed > 0 {
		t.Errorf("%d children did not exit on their own", killed)
	}
	if reused == 0 {
		t.Errorf("no pid was handed out twice among %d children with pid_max %d: no wraparound", churned, pidReuseMax)
	}
	if applied == 0 {
		t.Errorf("the engine set no child's node while it lived: the test proves nothing")
	}

	// Every live task now: outside A and B -1; in A or B, never the other's node.
	e.Pass()
	stopEngine()
	liveChecked, liveWrong := checkLiveTasks(t, p, paths["a"], paths["b"])
	audit.mu.Lock()
	sets, wrongSets, unknownSets := audit.sets, slices.Clone(audit.wrong), audit.unknown
	audit.mu.Unlock()
	for _, w := range wrongSets {
		t.Errorf("misapplied: %s", w)
	}
	misapplied += len(wrongSets) + liveWrong

	line := fmt.Sprintf("pidreuse pid_max=%d churned=%d reused_pids=%d wraps=%d fork_retries=%d applied_children=%d misapplied=%d sets=%d wrong_sets=%d unattributed_sets=%d live_checked=%d churn_s=%.1f",
		pidReuseMax, churned, reused, wraps, retries, applied, misapplied, sets, len(wrongSets), unknownSets, liveChecked, churnTime.Seconds())
	fmt.Println(line) // unindented, for lab.sh's grep
	t.Log(line)

	// Undo with a fresh engine pass: A and B back to -1.
	e.SetDesired(nil)
	e.Pass()
}

// checkLiveTasks reads every live task's value: -1 outside the two containers, and in each
// container never the other's node (A holds 1, B holds 0). It returns how many tasks it
// checked and how many were wrong.
func hasMM(tid int) bool {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", tid))
	return err == nil && strings.Contains(string(data), "\nVmSize:")
}

func checkLiveTasks(t *testing.T, p *prctl.Prctl, pathA, pathB string) (checked, wrong int) {
	t.Helper()
	tids, err := filepath.Glob("/proc/[0-9]*/task/[0-9]*")
	if err != nil {
		t.Fatal(err)
	}
	for _, dir := range tids {
		tid, err := strconv.Atoi(filepath.Base(dir))
		if err != nil {
			continue
		}
		where, ok := liveCgroup(tid)
		if !ok {
			continue // gone, exiting, or a kernel thread without a v2 line
		}
		v, err := p.Get(tid)
		if errors.Is(err, unix.ESRCH) {
			continue
		}
		if errors.Is(err, unix.EPERM) && !hasMM(tid) {
			continue // a kernel thread: not ptrace-able
		}
		if err != nil {
			t.Errorf("GET of task %d: %v", tid, err)
			continue
		}
		checked++
		bad := false
		switch where {
		case pathA:
			bad = v == 0
		case pathB:
			bad = v == 1
		default:
			bad = v != numa.NoNode
		}
		if bad {
			wrong++
			t.Errorf("misapplied: live task %d in %s holds %d", tid, where, v)
		}
	}
	return checked, wrong
}

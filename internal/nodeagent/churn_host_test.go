// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build host && linux

package nodeagent

import (
	"context"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/numapref/numapref/internal/cpuset"
	"github.com/numapref/numapref/internal/nodeagent/cgroups"
	"github.com/numapref/numapref/internal/nodeagent/desire"
	"github.com/numapref/numapref/internal/numa/emulator"
	"github.com/numapref/numapref/internal/testutil/hostlab"
)

// twoNodeResolver is the resolver of an emulated two-node machine. This host has one NUMA
// node, so every real cpuset.mems is "0" and a desire for node 1 would be (rightly) left
// alone as MemoryPinnedElsewhere; on the emulated machine (two possible nodes) the root
// cpuset would hold both, so a container whose real mems are the whole host's ("0") is
// reported as "0-1". Cgroup resolution and task listing, which the test is about, are the
// real ones.
type twoNodeResolver struct{ *cgroups.Resolver }

func (r twoNodeResolver) Cpuset(c *cgroups.Container) (cpuset.Cpuset, error) {
	cs, err := r.Resolver.Cpuset(c)
	if err == nil && slices.Equal(cs.Mems, []int{0}) {
		cs.Mems = []int{0, 1}
	}
	return cs, err
}

// churnScript forks n short-lived processes, 50 at a time: subshells that fork and exit
// at once and, one in five, a fork+exec of a 20 ms sleep (long enough for the engine to
// catch some, short enough that their pids are soon free again). It starts when a line arrives on
// stdin, so the test can move it into its cgroup first.
const churnScript = `read go; i=0
while [ $i -lt %d ]; do
	i=$((i+1))
	if [ $((i %% 5)) -eq 0 ]; then /bin/sleep 0.02 & else ( : ) & fi
	if [ $((i %% 50)) -eq 0 ]; then wait; fi
done; wait`

// startChurn starts a churning shell, moved by attach (when not nil) into a container,
// and returns functions that wait for it to finish and that kill it.
func startChurn(t *testing.T, attach func(pid int) error, n int) (wait func() error, kill func()) {
	t.Helper()
	cmd := exec.Command("/bin/sh", "-c", fmt.Sprintf(churnScript, n))
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := hostlab.StartOnSpawnerThread(cmd); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	if attach != nil {
		if err := attach(cmd.Process.Pid); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := io.WriteString(in, "go\n"); err != nil {
		t.Fatal(err)
	}
	in.Close()
	return cmd.Wait, func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); cmd.Process.Kill() }
}

// TestEngineChurnNeverMisapplies: two selected containers with different nodes, a
// selected bystander container and a process outside every lab cgroup all fork
// thousands of short-lived processes (pids are recycled: pid_max is small on many hosts,
// 32768 here) while the engine runs on fork events and rescans every few milliseconds.
// The emulator's audit log of every SET must show none on a task outside the selected
// containers' cgroups and none with the other container's node.
func TestEngineChurnNeverMisapplies(t *testing.T) {
	el := newEngineLab(t)
	audit := filepath.Join(t.TempDir(), "audit.jsonl")
	if err := el.emu.AuditTo(audit); err != nil {
		t.Fatal(err)
	}
	pe := openProcEvents(t)

	var cs []*labContainer
	var ctrs []*hostlab.Container
	for _, spec := range []struct {
		name string
		node int
	}{{"a", 0}, {"b", 1}, {"bystander", 0}} {
		w, c, d := el.container(t, spec.name, spec.node, 2)
		cs = append(cs, &labContainer{name: spec.name, id: strings.TrimPrefix(c.ContainerID, "containerd://"), desire: d, pid: w.Pid()})
		ctrs = append(ctrs, c)
	}
	a, b, bystander := cs[0], cs[1], cs[2]

	e, err := NewEngine(EngineConfig{Resolver: twoNodeResolver{el.resolver}, Kernel: el.emu, Support: el.emu.Support(),
		OnlineNodes: []int{0, 1}, LedgerPath: el.ledger, RescanInterval: 5 * time.Millisecond, ProcEvents: pe.Events()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() { runEngine(t, ctx, e); close(stopped) }()
	defer func() { cancel(); <-stopped }()
	e.SetDesired([]desire.Desire{a.desire, b.desire})
	waitFor(t, "a's workload holds node 0 and b's node 1", func() bool {
		return allEqual(el.values(t, a.pid), 0) && allEqual(el.values(t, b.pid), 1)
	})

	const perChurner = 750 // 3000 processes: ~15 s on 2 loaded cores
	began := time.Now()
	var waits []func() error
	var kills []func()
	for _, c := range append(ctrs, nil) { // nil: outside every lab cgroup
		var attach func(int) error
		if c != nil {
			attach = c.Attach
		}
		wait, kill := startChurn(t, attach, perChurner)
		waits, kills = append(waits, wait), append(kills, kill)
	}
	var wg sync.WaitGroup
	errs := make([]error, len(waits))
	for i, w := range waits {
		wg.Go(func() { errs[i] = w() })
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(40 * time.Second): // a bound, not an expectation: the audit still holds
		t.Log("churn cut short after 40s: this host is very slow")
		for _, k := range kills {
			k()
		}
		<-done
	}
	churned := time.Since(began)
	for i, err := range errs {
		if err != nil {
			t.Errorf("churner %d: %v", i, err)
		}
	}
	cancel()
	<-stopped

	// The long-lived tasks: a at 0, b at 1, the bystander untouched.
	e.Pass()
	for c, want := range map[*labContainer]int{a: 0, b: 1, bystander: -1} {
		if v := el.values(t, c.pid); !allEqual(v, want) {
			t.Errorf("%s's workload holds %v, want all %d", c.name, v, want)
		}
	}
	if r := e.Results()[b.desire.Key()]; r.Reason != "Applied" {
		t.Errorf("b: %s (%s), want Applied", r.Reason, r.Message)
	}

	recs, cut, err := emulator.ReadAudit(audit)
	if err != nil || cut != 0 {
		t.Fatalf("audit log: %d cut records (nothing was killed), %v", cut, err)
	}
	n, gone := auditSets(t, recs, cs, map[string][]int{"a": {0}, "b": {1}})
	starts := map[int]map[uint64]bool{}
	for _, r := range recs {
		if starts[r.TID] == nil {
			starts[r.TID] = map[uint64]bool{}
		}
		starts[r.TID][r.Start] = true
	}
	reused := 0
	for _, s := range starts {
		if len(s) > 1 {
			reused++
		}
	}
	st := el.emu.Stats()
	t.Logf("%d short-lived processes in %v; %d SETs on %d tids (%d tids SET as two or more different tasks: reused), %d on tasks exiting or gone when their cgroup was read, 0 misapplied; emulator: %d inherited, %d assumed fresh, %d events lost",
		4*perChurner, churned.Round(time.Millisecond), n, len(starts), reused, gone, st.Inherited, st.AssumedFresh, st.EventsLost)
}

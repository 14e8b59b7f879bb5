// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build host && linux

package nodeagent

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/numapref/numapref/internal/testutil/files"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"github.com/go-logr/logr/testr"

	"github.com/numapref/numapref/internal/nodeagent/cgroups"
	"github.com/numapref/numapref/internal/nodeagent/desire"
	"github.com/numapref/numapref/internal/numa/emulator"
	"github.com/numapref/numapref/internal/testutil/hostlab"
)

// The crash test runs the engine in a child process (this test binary re-executed with
// crashHelperEnv naming a crashConfig file; TestMain runs runCrashHelperIfAsked), shares the
// emulator's state directory and the ledger with it, kills it with SIGKILL at seeded random
// points of its apply and undo passes, restarts it, and checks the end state after every
// restart.
const crashHelperEnv = "NUMAPREF_CRASH_HELPER"

// crashConfig is what the parent tells a child engine.
type crashConfig struct {
	// Mode is "cycle" (apply Apply, undo to Undo, again, until killed) or "converge" (set
	// Final, run a few passes, exit 0).
	Mode              string
	Apply, Undo       []desire.Desire
	Final             []desire.Desire
	LedgerPath        string
	KubeletCgroupRoot string
	Emulator          emulator.Options
	// Audit is the emulator's audit log (shared, append-only); Markers gets one line per
	// phase ("R|A|U <unix ns>") so the parent knows where its SIGKILL landed.
	Audit, Markers string
	// CompactAt is the journal's size past which a full pass compacts it (0: the default).
	CompactAt int
	// CrashAt, when set, is a step of the ledger's writes (see engineHooks.journalStep)
	// at whose CrashAfter-th occurrence the child SIGKILLs itself, after writing the first
	// TornBytes bytes of the record when the step is "append".
	CrashAt               string
	CrashAfter, TornBytes int
}

// crashHooks are the child's hooks: its SIGKILL at cfg's step of a ledger write.
func crashHooks(cfg crashConfig) engineHooks {
	if cfg.CrashAt == "" {
		return engineHooks{}
	}
	seen := 0
	return engineHooks{journalStep: func(step string, f *os.File, frame []byte) {
		if step != cfg.CrashAt {
			return
		}
		if seen++; seen < cfg.CrashAfter {
			return
		}
		if step == "append" && cfg.TornBytes > 0 {
			_, _ = f.Write(frame[:min(cfg.TornBytes, len(frame)-1)]) // the part a crash mid-write leaves; the kill follows either way
		}
		syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {} // the signal is on its way
	}}
}

// runCrashHelperIfAsked runs the child engine of TestEngineCrashRestartConverges when
// this process is one (crashHelperEnv set; TestMain calls it first) and exits; otherwise
// it returns at once.
func runCrashHelperIfAsked() {
	path := os.Getenv(crashHelperEnv)
	if path == "" {
		return
	}
	if err := runCrashHelper(path); err != nil {
		fmt.Println("crash helper:", err)
		os.Exit(2)
	}
	os.Exit(0)
}

// runCrashHelper is the child engine: it runs cfg's mode with the shared emulator state
// and ledger. A cycle child only ends when the parent kills it.
func runCrashHelper(path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var cfg crashConfig
	if err := json.Unmarshal(data, &cfg); err != nil {
		return err
	}
	emu, err := emulator.New(cfg.Emulator)
	if err != nil {
		return err
	}
	defer emu.Close()
	if err := emu.AuditTo(cfg.Audit); err != nil {
		return err
	}
	r, err := cgroups.NewResolver("/", cgroups.ResolverOptions{Driver: cgroups.DriverCgroupfs, KubeletCgroupRoot: cfg.KubeletCgroupRoot})
	if err != nil {
		return err
	}
	log := funcr.New(func(prefix, args string) { fmt.Println(prefix, args) }, funcr.Options{})
	e, err := NewEngine(EngineConfig{Resolver: r, Kernel: emu, Support: emu.Support(), OnlineNodes: []int{0, 1},
		LedgerPath: cfg.LedgerPath, RescanInterval: time.Hour, Log: log, journalCompactAt: cfg.CompactAt, hooks: crashHooks(cfg)})
	if err != nil {
		fmt.Printf("LEDGER-ERROR %v\n", err) // the parent asserts there is none: writes are atomic
	}
	markers, err := os.OpenFile(cfg.Markers, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	mark := func(phase string) { fmt.Fprintf(markers, "%s %d\n", phase, time.Now().UnixNano()) }
	switch cfg.Mode {
	case "converge":
		e.SetDesired(cfg.Final)
		for range 3 {
			e.Pass()
		}
		return nil
	case "cycle":
		mark("R")
		deadline := time.Now().Add(30 * time.Second) // the parent kills it long before
		for time.Now().Before(deadline) {
			mark("A")
			e.SetDesired(cfg.Apply)
			e.Pass()
			e.Pass()
			mark("U")
			e.SetDesired(cfg.Undo)
			e.Pass()
			e.Pass()
		}
		return errors.New("cycle child was never killed")
	default:
		return fmt.Errorf("unknown mode %q", cfg.Mode)
	}
}

// runCrashChild starts the child engine with cfg. Its output goes to out.
func runCrashChild(t *testing.T, dir string, cfg crashConfig, out *bytes.Buffer) *exec.Cmd {
	t.Helper()
	data, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "config.json")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), crashHelperEnv+"="+path)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.Stdout, cmd.Stderr = out, out
	if err := hostlab.StartOnSpawnerThread(cmd); err != nil {
		t.Fatal(err)
	}
	return cmd
}

// readMarkers returns the child's phase markers in order.
func readMarkers(t *testing.T, path string) (phases []string, at []int64) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		p, ns, ok := strings.Cut(sc.Text(), " ")
		n, err := strconv.ParseInt(ns, 10, 64)
		if !ok || err != nil {
			continue // a line cut by SIGKILL: cannot happen with one write, but be safe
		}
		phases, at = append(phases, p), append(at, n)
	}
	return phases, at
}

// labContainer is one container of a test, its workload and what its tasks hold when the
// agent leaves them alone.
type labContainer struct {
	name   string
	id     string // 64-hex container id: a component of its cgroup path
	desire desire.Desire
	pid    int
	own    map[int]int // tid → the application's own value; every other task holds -1
}

// cgroupOf tells which of cs a task's /proc/<tid>/cgroup lines place it in ("" for none):
// the container id is a component of the container's cgroup path (and of its sub-cgroups').
func cgroupOf(lines []string, cs []*labContainer) string {
	for _, l := range lines {
		for _, c := range cs {
			if strings.HasSuffix(l, "/"+c.id) || strings.Contains(l, "/"+c.id+"/") {
				return c.name
			}
		}
	}
	return ""
}

// crashLab is the set-up of the crash tests: three containers, a, b and a bystander, the
// config every child shares, and the check of the end state.
type crashLab struct {
	el    *engineLab
	cs    []*labContainer
	base  crashConfig
	dir   string
	audit string
}

func newCrashLab(t *testing.T) *crashLab {
	el := newEngineLab(t) // this process's emulator follows task creation for the children
	var cs []*labContainer
	for _, spec := range []struct {
		name    string
		threads int
	}{{"a", 4}, {"b", 3}, {"bystander", 2}} {
		w, c, d := el.container(t, spec.name, 0, spec.threads)
		cs = append(cs, &labContainer{name: spec.name, id: strings.TrimPrefix(c.ContainerID, "containerd://"),
			desire: d, pid: w.Pid(), own: map[int]int{}})
	}
	b := cs[1] // cs[2] is a bystander, never selected
	// The application in b chose node 1 for one of its threads itself: the agent may
	// override it while b is selected, and must give it back afterwards.
	tids, err := hostlab.TasksOf(b.pid)
	if err != nil {
		t.Fatal(err)
	}
	b.own[tids[len(tids)-1]] = 1
	if err := el.emu.Set(tids[len(tids)-1], 1); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	audit := filepath.Join(dir, "audit.jsonl")
	base := crashConfig{LedgerPath: el.ledger, KubeletCgroupRoot: el.lab.KubeletCgroupRoot(),
		Emulator: el.emuOpts, Audit: audit, Apply: []desire.Desire{cs[0].desire, b.desire}}
	base.Emulator.ForkEvents = false // the parent listens; a child that dies must not be the listener
	return &crashLab{el: el, cs: cs, base: base, dir: dir, audit: audit}
}

// check compares every task of every container with what final selects, and the ledger
// (snapshot and journal) with it.
func (cl *crashLab) check(t *testing.T, i int, final []*labContainer) {
	t.Helper()
	for _, c := range cl.cs {
		selected := slices.Contains(final, c)
		for tid, v := range cl.el.values(t, c.pid) {
			want, own := c.own[tid]
			if !own {
				want = -1
			}
			if selected {
				want = 0
			}
			if v != want {
				t.Fatalf("iteration %d: task %d of %s (selected: %v) holds %d, want %d", i, tid, c.name, selected, v, want)
			}
		}
	}
	l, err := readLedger(cl.el.ledger)
	if err != nil {
		t.Fatalf("iteration %d: ledger: %v", i, err)
	}
	for _, c := range cl.cs {
		if _, in := l[c.desire.Key()]; in != slices.Contains(final, c) {
			t.Fatalf("iteration %d: ledger has %s: %v, want %v", i, c.name, in, !in)
		}
	}
}

// converge runs a child that enforces final and exits, and checks the end state. It
// returns the child's output.
func (cl *crashLab) converge(t *testing.T, i int, final []*labContainer) string {
	t.Helper()
	var out bytes.Buffer
	cfg := cl.base
	cfg.Mode, cfg.Markers, cfg.Final = "converge", filepath.Join(cl.dir, "markers"), desiresOf(final)
	child := runCrashChild(t, cl.dir, cfg, &out)
	if err := child.Wait(); err != nil {
		t.Fatalf("iteration %d: converging child: %v\n%s", i, err, out.String())
	}
	if strings.Contains(out.String(), "LEDGER-ERROR") {
		t.Fatalf("iteration %d: the ledger was damaged by a SIGKILL (writes must be atomic):\n%s", i, out.String())
	}
	cl.check(t, i, final)
	return out.String()
}

func TestEngineCrashRestartConverges(t *testing.T) {
	cl := newCrashLab(t)
	seed := uint64(20240608)
	if s := os.Getenv("NUMAPREF_CRASH_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	rng := rand.New(rand.NewPCG(seed, 8))
	iterations := 60
	t.Logf("seed %d, %d iterations", seed, iterations)
	cs, dir, audit := cl.cs, cl.dir, cl.audit
	a, b := cs[0], cs[1]
	base := cl.base
	// A small journal bound: full passes compact often, so kills land in compactions too.
	base.CompactAt = 2 << 10

	// Calibrate: how long a child takes to start, and one apply+undo cycle.
	markers := filepath.Join(dir, "markers")
	var out bytes.Buffer
	cfg := base
	cfg.Mode, cfg.Markers = "cycle", markers
	start := time.Now()
	child := runCrashChild(t, dir, cfg, &out)
	waitFor(t, "the calibration child completes 3 cycles", func() bool {
		p, _ := readMarkers(t, markers)
		return len(p) >= 7
	})
	child.Process.Kill()
	child.Wait()
	_, at := readMarkers(t, markers)
	ready := time.Duration(at[0] - start.UnixNano())
	cycle := time.Duration(at[6]-at[1]) / 3
	t.Logf("calibration: child ready after %v, one apply+undo cycle %v", ready, cycle)

	killed := map[string]int{}
	began := time.Now()
	for i := range iterations {
		undo := subset(rng, a, b)
		final := subset(rng, a, b)
		if i == iterations-1 {
			final = nil // everything deleted
		}
		os.Remove(markers)
		out.Reset()
		cfg := base
		cfg.Mode, cfg.Markers, cfg.Undo = "cycle", markers, desiresOf(undo)
		// From half-way through start-up to three cycles in: most kills land in a pass.
		delay := ready/2 + time.Duration(rng.Int64N(int64(ready/2+3*cycle)))
		start := time.Now()
		child := runCrashChild(t, dir, cfg, &out)
		time.Sleep(time.Until(start.Add(delay))) // to the kill point: chosen, not waited for
		child.Process.Signal(syscall.SIGKILL)
		killedAt := time.Now().UnixNano()
		child.Wait()
		phases, at := readMarkers(t, markers)
		phase := "startup"
		for j := range phases {
			if at[j] <= killedAt {
				phase = map[string]string{"R": "startup", "A": "apply", "U": "undo"}[phases[j]]
			}
		}
		killed[phase]++

		cl.converge(t, i, final)
	}
	t.Logf("%d kills in %v: %v", iterations, time.Since(began).Round(time.Millisecond), killed)
	if killed["apply"] < iterations/10 || killed["undo"] < iterations/10 {
		t.Errorf("kills landed %v: want at least %d in apply and in undo", killed, iterations/10)
	}

	// Final state: nothing the agent set is left (the application's own value is back),
	// the ledger is empty, and every SET any child made was on a task of a or b.
	cl.check(t, iterations, nil)
	if l, err := readLedger(cl.el.ledger); err != nil || len(l) != 0 {
		t.Errorf("final ledger = %v, %v; want empty", l, err)
	}
	// A child killed while writing a record leaves it cut short: at most one per kill.
	recs, cut, err := emulator.ReadAudit(audit)
	if err != nil {
		t.Fatal(err)
	}
	if cut > iterations {
		t.Errorf("%d cut audit records for %d kills", cut, iterations)
	}
	n, gone := auditSets(t, recs, cs, map[string][]int{"a": {0, -1}, "b": {0, -1, 1}})
	t.Logf("audit: %d SETs, %d on tasks gone before their cgroup was read, %d records cut by a kill, 0 misapplied", n, gone, cut)
}

// TestEngineCrashInLedgerWrites kills the child engine (SIGKILL, from inside the write) at
// every step of the ledger's writes: with a record cut short at several lengths, after a
// record's write and before its fsync, after a compaction's new snapshot and before its
// journal, at the first few occurrences of each. After each kill a restarted engine
// converges to a random desire: every value the agent set is undone where it must be, the
// cut record is dropped (and said so), and nothing is reported damaged.
func TestEngineCrashInLedgerWrites(t *testing.T) {
	cl := newCrashLab(t)
	rng := rand.New(rand.NewPCG(24, 2))
	type crash struct {
		at   string
		torn int
	}
	crashes := []crash{{"append", 1}, {"append", 7}, {"append", 9}, {"append", 40}, {"append", 1 << 20}, {"written", 0}, {"snapshot", 0}}
	i := 0
	for _, c := range crashes {
		for _, n := range []int{1, 2, 5} {
			var out bytes.Buffer
			cfg := cl.base
			// Undo unselects at least one of the two, so every cycle writes the ledger.
			undo := [][]*labContainer{nil, {cl.cs[0]}, {cl.cs[1]}}[rng.IntN(3)]
			cfg.Mode, cfg.Markers, cfg.Undo = "cycle", filepath.Join(cl.dir, "markers"), desiresOf(undo)
			cfg.CrashAt, cfg.CrashAfter, cfg.TornBytes = c.at, n, c.torn
			cfg.CompactAt = 1 // every full pass compacts: a "snapshot" step in each
			child := runCrashChild(t, cl.dir, cfg, &out)
			err := child.Wait()
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
				t.Fatalf("crash at %s #%d: the child ended with %v, want killed at that step\n%s", c.at, n, err, out.String())
			}
			final := subset(rng, cl.cs[0], cl.cs[1])
			log := cl.converge(t, i, final)
			if torn := strings.Contains(log, "torn last record"); torn != (c.at == "append" && c.torn > 0) {
				t.Errorf("crash at %s #%d (%d bytes written): the restart said a torn record was dropped: %v", c.at, n, c.torn, torn)
			}
			i++
		}
	}
	cl.converge(t, i, nil)
	if l, err := readLedger(cl.el.ledger); err != nil || len(l) != 0 {
		t.Errorf("final ledger = %v, %v; want empty", l, err)
	}
	recs, _, err := emulator.ReadAudit(cl.audit)
	if err != nil {
		t.Fatal(err)
	}
	n, _ := auditSets(t, recs, cl.cs, map[string][]int{"a": {0, -1}, "b": {0, -1, 1}})
	t.Logf("%d kills inside ledger writes, %d SETs, 0 misapplied", i, n)
}

// subset returns a seeded random subset of cs.
func subset(rng *rand.Rand, cs ...*labContainer) []*labContainer {
	var out []*labContainer
	for _, c := range cs {
		if rng.IntN(2) == 0 {
			out = append(out, c)
		}
	}
	return out
}

func desiresOf(cs []*labContainer) []desire.Desire {
	out := []desire.Desire{}
	for _, c := range cs {
		out = append(out, c.desire)
	}
	return out
}

// auditSets checks every SET of the emulator's audit log: each must be on a task that was,
// at SET time, in one of the containers named in allowed, with one of the values allowed
// for that container. It returns the number of SETs and of those that cannot be
// attributed (the task exited before its cgroup could be read).
func auditSets(t *testing.T, recs []emulator.AuditRecord, cs []*labContainer, allowed map[string][]int) (n, gone int) {
	t.Helper()
	misapplied := 0
	for _, r := range recs {
		if r.Gone {
			gone++
			continue
		}
		c := cgroupOf(r.Cgroup, cs)
		if vals, ok := allowed[c]; !ok || !slices.Contains(vals, r.NID) {
			misapplied++
			if misapplied <= 10 {
				t.Errorf("misapplied SET: node %d on task %d (tgid %d, start %d) in %q, cgroups %v", r.NID, r.TID, r.TGID, r.Start, c, r.Cgroup)
			}
		}
	}
	if misapplied > 0 {
		t.Errorf("%d of %d SETs misapplied", misapplied, len(recs))
	}
	if len(recs) == 0 {
		t.Error("the audit log holds no SET at all")
	}
	return len(recs), gone
}

// TestEngineRecoversFromGarbageLedgers: whatever a ledger file holds, the engine starts,
// reports what was wrong (nothing for a well-formed one), never panics, and rebuilds it.
func TestEngineRecoversFromGarbageLedgers(t *testing.T) {
	el := newEngineLab(t)
	w, _, d := el.container(t, "a", 0, 1)
	rng := rand.New(rand.NewPCG(8, 8))
	random := make([]byte, 512)
	for i := range random {
		random[i] = byte(rng.UintN(256))
	}
	for name, c := range map[string]struct {
		content string
		damaged bool
	}{
		"empty":         {"", true},
		"truncated":     {`{"version":1,"containers":[{"podUID":"x","container":"main","tasks":{"12":{"start":`, true},
		"random bytes":  {string(random), true},
		"wrong version": {`{"version":99,"containers":[]}`, true},
		"wrong types":   {`{"version":1,"containers":[{"podUID":7,"tasks":[]}]}`, true},
		"null entries":  {`{"version":1,"containers":[null,{"podUID":"","container":""},{"podUID":"p","container":"c","tasks":null}]}`, false},
		"bad tids":      {`{"version":1,"containers":[{"podUID":"p","container":"c","containerID":"containerd://0","tasks":{"-1":null,"0":{"start":1,"prev":-7,"values":[99]}}}]}`, false},
	} {
		t.Run(name, func(t *testing.T) {
			files.Write(t, el.ledger, c.content)
			e, err := NewEngine(EngineConfig{Resolver: el.resolver, Kernel: el.emu, Support: el.emu.Support(),
				OnlineNodes: []int{0, 1}, LedgerPath: el.ledger, Log: testr.New(t)})
			if (err != nil) != c.damaged {
				t.Errorf("NewEngine error = %v, want damaged: %v", err, c.damaged)
			}
			e.SetDesired([]desire.Desire{d})
			if v := el.settle(t, e, w.Pid()); !allEqual(v, 0) {
				t.Fatalf("not applied: %v", v)
			}
			if l, err := readLedger(el.ledger); err != nil || l[d.Key()] == nil {
				t.Errorf("ledger not rebuilt: %v, %v", l, err)
			}
			e.SetDesired(nil)
			e.Pass()
			if v := el.values(t, w.Pid()); !allEqual(v, -1) {
				t.Errorf("after undo: %v, want all -1", v)
			}
		})
	}
}

// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build host && linux

package nodeagent

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/numapref/numapref/internal/testutil/files"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
	"github.com/numapref/numapref/internal/nodeagent/cgroups"
	"github.com/numapref/numapref/internal/nodeagent/desire"
	"github.com/numapref/numapref/internal/nodeagent/plan"
	"github.com/numapref/numapref/internal/numa"
	"github.com/numapref/numapref/internal/numa/emulator"
	"github.com/numapref/numapref/internal/numa/prctl"
	"github.com/numapref/numapref/internal/testutil/hostlab"
	"github.com/numapref/numapref/internal/testutil/testenv"
)

// The pid-reuse tests force a task's id onto a stranger inside the window between a pass's
// planning and its SET. Pids are only handed out predictably in a PID namespace nobody else
// forks in, so the engine runs in a helper process (this test binary, re-executed with
// pidReuseHelperEnv naming a pidReuseConfig; TestMain runs runPIDReuseHelperIfAsked) that is
// pid 1 of a new PID namespace, with its own /proc, the kernel emulator and real cgroups.
// The engine's test seams kill the target and set /proc/sys/kernel/ns_last_pid so that the
// next process, the stranger, gets its id.
const pidReuseHelperEnv = "NUMAPREF_PIDREUSE_HELPER"

// pidReuseConfig is what the parent tells the helper.
type pidReuseConfig struct {
	// Window is where the id changes hands: "before-set" (right before the SET's system
	// call, after its checks: the SET hits the stranger) or "after-plan" (after the
	// write-ahead ledger write, before the checks).
	Window string
	// PIDFD identifies tasks by pidfd as the agent does; false leaves the start time alone
	// (kernels without pidfds).
	PIDFD bool
	// StrangerInside puts the stranger into the container (else it stays outside).
	StrangerInside bool
	// Refresh, for Window "inherit", runs a full pass between the reuse and the undo.
	Refresh bool

	ContainerDirs     []string // the container's cgroup in every hierarchy
	KubeletCgroupRoot string
	Desire            desire.Desire
	SysRoot, StateDir string
	LedgerPath        string
}

// pidReuseResult is what the helper found.
type pidReuseResult struct {
	ID int // the target's id, then the stranger's
	// Attempts is how many processes it took to get the id back; 0 if the seam never ran.
	Attempts int
	// StrangerValue is the stranger's emulated value after the pass, SetsOnStranger the
	// SETs the pass issued on the id once the stranger had it.
	StrangerValue  int
	SetsOnStranger int
	Raced, Applied float64
	Reason         string
	Log            []string
}

// runPIDReuseHelperIfAsked runs the helper when this process is one and exits; otherwise
// it returns at once.
func runPIDReuseHelperIfAsked() {
	path := os.Getenv(pidReuseHelperEnv)
	if path == "" {
		return
	}
	res, err := runPIDReuseHelper(path)
	if err != nil {
		fmt.Println("pid reuse helper:", err)
		os.Exit(2)
	}
	data, _ := json.Marshal(res)
	fmt.Printf("RESULT %s\n", data)
	os.Exit(0)
}

// runPIDReuseHelper is the helper: pid 1 of its PID namespace, in a mount namespace of
// its own where it mounts that namespace's /proc.
func runPIDReuseHelper(path string) (res pidReuseResult, err error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return res, err
	}
	var cfg pidReuseConfig
	if err := json.Unmarshal(data, &cfg); err != nil {
		return res, err
	}
	if os.Getpid() != 1 {
		return res, fmt.Errorf("the helper is pid %d, not 1 of a new PID namespace", os.Getpid())
	}
	if err := syscall.Mount("", "/", "", syscall.MS_REC|syscall.MS_PRIVATE, ""); err != nil {
		return res, fmt.Errorf("making mounts private: %w", err)
	}
	if err := syscall.Mount("proc", "/proc", "proc", syscall.MS_NOSUID|syscall.MS_NODEV|syscall.MS_NOEXEC, ""); err != nil {
		return res, fmt.Errorf("mounting this PID namespace's /proc: %w", err)
	}
	emu, err := emulator.New(emulator.Options{StateDir: cfg.StateDir, ProcRoot: "/proc", SysRoot: cfg.SysRoot})
	if err != nil {
		return res, err
	}
	defer emu.Close()
	r, err := cgroups.NewResolver("/", cgroups.ResolverOptions{Driver: cgroups.DriverCgroupfs, KubeletCgroupRoot: cfg.KubeletCgroupRoot})
	if err != nil {
		return res, err
	}

	if cfg.Window == "inherit" {
		return runInheritedReuse(cfg, emu, r)
	}
	target, err := startSleeper(cfg.ContainerDirs)
	if err != nil {
		return res, err
	}
	defer stopSleeper(target)
	res.ID = target.Process.Pid
	var stranger *exec.Cmd
	defer func() { stopSleeper(stranger) }()
	rec := &setRecorder{Kernel: emu}
	recycle := func() {
		if stranger != nil {
			return // once
		}
		var rerr error
		if stranger, res.Attempts, rerr = recyclePID(target, cfg); rerr != nil {
			res.Log = append(res.Log, "recycling: "+rerr.Error())
			return
		}
		rec.watch(res.ID)
	}
	hooks := engineHooks{afterWriteAhead: recycle}
	if cfg.Window == "before-set" {
		hooks = engineHooks{beforeSet: func(tid int) {
			if tid == res.ID {
				recycle()
			}
		}}
	}
	handles := plan.PIDFDOpener(plan.OpenPIDFD)
	if !cfg.PIDFD {
		handles = noPIDFDs
	}
	var logMu sync.Mutex
	log := funcr.New(func(prefix, args string) {
		logMu.Lock()
		defer logMu.Unlock()
		res.Log = append(res.Log, prefix+" "+args)
	}, funcr.Options{Verbosity: 2})
	m := NewMetrics()
	e, err := NewEngine(EngineConfig{Resolver: r, Kernel: rec, Support: emu.Support(), OnlineNodes: []int{0, 1},
		LedgerPath: cfg.LedgerPath, RescanInterval: time.Hour, Metrics: m, Log: log, handles: handles, hooks: hooks})
	if err != nil {
		return res, err
	}
	e.SetDesired([]desire.Desire{cfg.Desire})
	e.Pass()
	if stranger == nil {
		return res, fmt.Errorf("the stranger never took id %d (log: %v)", res.ID, res.Log)
	}
	if res.StrangerValue, err = emu.Get(stranger.Process.Pid); err != nil {
		return res, fmt.Errorf("emulated GET of the stranger: %w", err)
	}
	res.SetsOnStranger = rec.count()
	res.Raced = testutil.ToFloat64(m.Sets.WithLabelValues(resultRaced))
	res.Applied = testutil.ToFloat64(m.Sets.WithLabelValues(numav1.ReasonApplied))
	res.Reason = e.Results()[cfg.Desire.Key()].Reason
	return res, nil
}

// runInheritedReuse is the helper's Window "inherit" (undo never forgets, scenario 1):
// the agent sets the target, whose id then goes to a stranger in the container that holds
// the agent's node, as a task cloned from one the agent set would (the emulator's value is
// set for it: it stands for the inheritance, which needs a clone from a task the agent
// set). Then the preference goes away, after a full pass when cfg.Refresh. The stranger's
// value after the undo is the result.
func runInheritedReuse(cfg pidReuseConfig, emu *emulator.Emulator, r *cgroups.Resolver) (res pidReuseResult, err error) {
	target, err := startSleeper(cfg.ContainerDirs)
	if err != nil {
		return res, err
	}
	res.ID = target.Process.Pid
	e, err := NewEngine(EngineConfig{Resolver: r, Kernel: emu, Support: emu.Support(), OnlineNodes: []int{0, 1},
		LedgerPath: cfg.LedgerPath, RescanInterval: time.Hour})
	if err != nil {
		stopSleeper(target)
		return res, err
	}
	e.SetDesired([]desire.Desire{cfg.Desire})
	e.Pass()
	if v, err := emu.Get(res.ID); err != nil || v != cfg.Desire.Node {
		stopSleeper(target)
		r := e.Results()[cfg.Desire.Key()]
		return res, fmt.Errorf("the target holds %d (%v) after the pass, want %d (%s: %s)", v, err, cfg.Desire.Node, r.Reason, r.Message)
	}
	stranger, attempts, err := recyclePID(target, cfg)
	res.Attempts = attempts
	if err != nil {
		return res, err
	}
	defer stopSleeper(stranger)
	if err := emu.Set(stranger.Process.Pid, cfg.Desire.Node); err != nil {
		return res, fmt.Errorf("giving the stranger the agent's node: %w", err)
	}
	if cfg.Refresh {
		e.Pass()
	}
	e.SetDesired(nil)
	e.Pass()
	res.StrangerValue, err = emu.Get(stranger.Process.Pid)
	return res, err
}

// startSleeper starts a process that sleeps until killed, attached to the cgroup
// directories dirs (none: it stays where the helper is).
func startSleeper(dirs []string) (*exec.Cmd, error) {
	cmd := exec.Command("/bin/sleep", "600")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := hostlab.StartOnSpawnerThread(cmd); err != nil {
		return nil, err
	}
	for _, dir := range dirs {
		if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(cmd.Process.Pid)), 0); err != nil {
			stopSleeper(cmd)
			return nil, fmt.Errorf("attaching %d: %w", cmd.Process.Pid, err)
		}
	}
	return cmd, nil
}

func stopSleeper(cmd *exec.Cmd) {
	if cmd != nil {
		cmd.Process.Kill()
		cmd.Wait()
	}
}

// recyclePID kills target and starts the stranger with its id: it waits for a clock tick
// after the target's start (so start times tell the two apart, as they would on a host
// where the id comes round again much later), then sets the namespace's last pid below
// the id and starts processes until one gets it (a thread the Go runtime starts meanwhile
// takes an id too).
func recyclePID(target *exec.Cmd, cfg pidReuseConfig) (*exec.Cmd, int, error) {
	id := target.Process.Pid
	old, err := numa.ReadTask("/proc", id)
	if err != nil {
		return nil, 0, err
	}
	stopSleeper(target)
	// A plain loop, not internal/testutil/poll: nothing here may make the Go runtime start
	// an OS thread before the stranger's fork, since in this pid namespace a new thread would
	// take the freed id for good. With poll's timers the stranger lost the id in 68 of 160
	// subtests (go test -tags host -run TestEngineSetsNothingOnARecycledPID -count=40), with this
	// loop in none.
	for deadline := time.Now().Add(time.Second); nowTicks() <= old.StartTime; {
		if time.Now().After(deadline) {
			return nil, 0, errors.New("no clock tick in a second")
		}
		time.Sleep(time.Millisecond) // poll interval
	}
	var dirs []string
	if cfg.StrangerInside {
		dirs = cfg.ContainerDirs
	}
	for attempt := 1; attempt <= 100; attempt++ {
		if err := os.WriteFile("/proc/sys/kernel/ns_last_pid", []byte(strconv.Itoa(id-1)), 0); err != nil {
			return nil, attempt, fmt.Errorf("writing ns_last_pid: %w", err)
		}
		cmd, err := startSleeper(dirs)
		if err != nil {
			return nil, attempt, err
		}
		if cmd.Process.Pid == id {
			return cmd, attempt, nil
		}
		stopSleeper(cmd)
	}
	return nil, 100, fmt.Errorf("id %d not handed out again in 100 attempts", id)
}

// nowTicks is the time since boot in clock ticks (USER_HZ, 100), the unit of start times.
func nowTicks() uint64 {
	data, err := os.ReadFile("/proc/uptime")
	if err != nil {
		return 0
	}
	secs, frac, _ := strings.Cut(strings.Fields(string(data))[0], ".")
	s, _ := strconv.ParseUint(secs, 10, 64)
	c, _ := strconv.ParseUint((frac + "00")[:2], 10, 64)
	return s*100 + c
}

// setRecorder counts the SETs on one id from the moment it is watched.
type setRecorder struct {
	prctl.Kernel
	mu   sync.Mutex
	id   int
	sets int
}

func (r *setRecorder) watch(id int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.id = id
}

func (r *setRecorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.sets
}

func (r *setRecorder) Set(tid, nid int) error {
	r.mu.Lock()
	if tid == r.id {
		r.sets++
	}
	r.mu.Unlock()
	return r.Kernel.Set(tid, nid)
}

// runPIDReuse runs the helper with cfg in a new PID and mount namespace.
func runPIDReuse(t *testing.T, cfg pidReuseConfig) pidReuseResult {
	t.Helper()
	data, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "config.json")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), pidReuseHelperEnv+"="+path)
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWPID | syscall.CLONE_NEWNS, Pdeathsig: syscall.SIGKILL}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := hostlab.StartOnSpawnerThread(cmd); err != nil {
		testenv.RequireNoError(t, err, "a new PID and mount namespace (CAP_SYS_ADMIN)", "sudo make host")
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("helper: %v\n%s", err, out.String())
	}
	_, line, ok := strings.Cut(out.String(), "RESULT ")
	var res pidReuseResult
	if !ok || json.Unmarshal([]byte(strings.TrimSpace(line)), &res) != nil {
		t.Fatalf("helper said no result:\n%s", out.String())
	}
	t.Logf("id %d handed to the stranger after %d attempt(s)", res.ID, res.Attempts)
	return res
}

// pidReuseLab makes the container the helpers' tasks run in: a lab cgroup with nothing in
// it (a task of this PID namespace would be invisible, as pid 0, in the helper's).
func pidReuseLab(t *testing.T) pidReuseConfig {
	t.Helper()
	testenv.RequireFile(t, "/proc/sys/kernel/ns_last_pid", "a kernel with CONFIG_CHECKPOINT_RESTORE (ns_last_pid)")
	lab := newLab(t)
	podUID, sum := hostlab.IDsOf(t.Name())
	c, err := lab.Container(corev1.PodQOSBurstable, podUID, sum)
	if err != nil {
		t.Fatal(err)
	}
	sys := t.TempDir()
	files.Write(t, filepath.Join(sys, "devices/system/node/possible"), "0-1\n")
	return pidReuseConfig{
		ContainerDirs: c.Dirs(), KubeletCgroupRoot: lab.KubeletCgroupRoot(), SysRoot: sys,
		Desire: desire.Desire{Pod: types.NamespacedName{Namespace: "ns", Name: "p"}, PodUID: types.UID(podUID), Container: "main",
			Ref: cgroups.ContainerRef{PodUID: podUID, QOS: corev1.PodQOSBurstable, ContainerID: c.ContainerID}, Node: 0},
	}
}

// The target exits right before its SET and a stranger outside the container takes its
// id, so the SET hits the stranger. The check after it (the pidfd, or the start time, and
// the container's listing) sees that: the SET is counted as raced and the stranger gets
// its own value back.
func TestEngineRacedSetOnARecycledPID(t *testing.T) {
	base := pidReuseLab(t)
	for name, pidfd := range map[string]bool{"pidfd": true, "start time": false} {
		t.Run(name, func(t *testing.T) {
			cfg := base
			cfg.Window, cfg.PIDFD = "before-set", pidfd
			cfg.StateDir, cfg.LedgerPath = t.TempDir(), filepath.Join(t.TempDir(), "ledger.json")
			res := runPIDReuse(t, cfg)
			if res.StrangerValue != -1 {
				t.Errorf("the stranger holds %d after the pass, want its own -1", res.StrangerValue)
			}
			if res.Raced != 1 || res.Applied != 0 {
				t.Errorf(`numapref_task_sets_total: raced %v, Applied %v; want 1 and 0`, res.Raced, res.Applied)
			}
			if res.SetsOnStranger != 2 {
				t.Errorf("%d SETs on the stranger, want 2: the raced one and the put-back", res.SetsOnStranger)
			}
			if t.Failed() {
				t.Logf("helper log:\n%s", strings.Join(res.Log, "\n"))
			}
		})
	}
}

// The id changes hands after the pass planned the SET and wrote its ledger, before the
// SET: the checks before it see the target gone, and no SET is issued on the id, for a
// stranger outside the container (its listing) and for one inside it (the pidfd, or the
// start time).
func TestEngineSetsNothingOnARecycledPID(t *testing.T) {
	base := pidReuseLab(t)
	tests := map[string]struct{ pidfd, inside bool }{
		"stranger outside, pidfd":      {true, false},
		"stranger inside, pidfd":       {true, true},
		"stranger inside, start time":  {false, true},
		"stranger outside, start time": {false, false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			cfg := base
			cfg.Window, cfg.PIDFD, cfg.StrangerInside = "after-plan", tc.pidfd, tc.inside
			cfg.StateDir, cfg.LedgerPath = t.TempDir(), filepath.Join(t.TempDir(), "ledger.json")
			res := runPIDReuse(t, cfg)
			if res.SetsOnStranger != 0 || res.StrangerValue != -1 {
				t.Errorf("%d SETs on the stranger, which holds %d; want none and -1", res.SetsOnStranger, res.StrangerValue)
			}
			if res.Raced != 0 || res.Applied != 0 {
				t.Errorf(`numapref_task_sets_total: raced %v, Applied %v; want 0 and 0`, res.Raced, res.Applied)
			}
			if t.Failed() {
				t.Logf("helper log:\n%s", strings.Join(res.Log, "\n"))
			}
		})
	}
}

// Undo never forgets, scenario 1, with real processes: a task the agent set exits and its
// id goes to a new task in the container that holds the agent's node (inherited). When the
// preference goes away the new task is restored to no node too, whether a full pass saw
// it first (and refreshed its ledger entry) or not.
func TestEngineUndoRestoresAnInheritorOnAReusedTID(t *testing.T) {
	base := pidReuseLab(t)
	for name, refresh := range map[string]bool{"undo at once": false, "a full pass first": true} {
		t.Run(name, func(t *testing.T) {
			cfg := base
			cfg.Window, cfg.StrangerInside, cfg.Refresh = "inherit", true, refresh
			cfg.StateDir, cfg.LedgerPath = t.TempDir(), filepath.Join(t.TempDir(), "ledger.json")
			res := runPIDReuse(t, cfg)
			if res.StrangerValue != -1 {
				t.Errorf("the task that took id %d holds %d after the undo, want -1", res.ID, res.StrangerValue)
			}
		})
	}
}

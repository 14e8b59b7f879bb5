// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build linux

package emulator

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"

	"github.com/numapref/numapref/internal/numa"
	"github.com/numapref/numapref/internal/numa/prctl"
)

// fakeProc is a /proc tree for emulator tests: tasks with a stat (start time) and a status
// (tgid, ids, capabilities), and the caller's thread-self/status.
//
// The ptrace model takes a task's dumpability from the owner of its status file. In an
// owned fakeProc (newOwnedFakeProc, root only: it chowns) each status file belongs to the
// task's uid, or to root when the task is not dumpable, as the kernel has it. Otherwise
// every file belongs to whoever runs the test, and only what does not depend on
// dumpability may be asserted: anything a caller with CAP_SYS_PTRACE (the default
// caller) does, and refusals for a difference of uids.
type fakeProc struct {
	t     *testing.T
	root  string
	owned bool
}

const (
	capsAll      = "000001ffffffffff"
	capsNoPtrace = "000001fffff7ffff" // capsAll without CAP_SYS_PTRACE (bit 19)
)

func newFakeProc(t *testing.T) *fakeProc {
	f := &fakeProc{t: t, root: t.TempDir()}
	f.caller(10, 0, capsAll)
	writeFile(t, filepath.Join(f.root, "sys", "kernel", "random", "boot_id"), "boot-1\n")
	return f
}

// caller sets the calling thread's thread group, uid and capabilities (permitted and
// effective).
func (f *fakeProc) caller(tgid int, uid uint32, caps string) { f.callerCaps(tgid, uid, caps, caps) }

// callerCaps is caller with distinct permitted and effective capabilities.
func (f *fakeProc) callerCaps(tgid int, uid uint32, capPrm, capEff string) {
	ids := fmt.Sprintf("%d\t%d\t%d\t%d", uid, uid, uid, uid)
	writeFile(f.t, filepath.Join(f.root, "thread-self", "status"), statusTextCaps(tgid, ids, ids, capPrm, capEff, true))
}

// task adds (or replaces) a task: as uid 0 with every capability, as another uid with
// none. In an owned fakeProc, a task that is not dumpable has its files owned by root.
func (f *fakeProc) task(tid, tgid int, start uint64, uid uint32, dumpable bool) {
	caps := capsNone
	if uid == 0 {
		caps = capsAll
	}
	f.taskCaps(tid, tgid, start, uid, dumpable, caps)
}

// taskCaps is task with the given capabilities (permitted and effective).
func (f *fakeProc) taskCaps(tid, tgid int, start uint64, uid uint32, dumpable bool, caps string) {
	dir := filepath.Join(f.root, strconv.Itoa(tid))
	writeFile(f.t, filepath.Join(dir, "stat"), statLine("task", strconv.FormatUint(start, 10)))
	ids := fmt.Sprintf("%d\t%d\t%d\t%d", uid, uid, uid, uid)
	status := filepath.Join(dir, "status")
	writeFile(f.t, status, statusText(tgid, ids, ids, caps, true))
	if f.owned {
		owner := uid
		if !dumpable {
			owner = 0
		}
		if err := os.Chown(status, int(owner), int(owner)); err != nil {
			f.t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(f.root, strconv.Itoa(tgid), "task", strconv.Itoa(tid)), 0o755); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fakeProc) remove(tid int) {
	if err := os.RemoveAll(filepath.Join(f.root, strconv.Itoa(tid))); err != nil {
		f.t.Fatal(err)
	}
}

// newTestEmulator opens an emulator on a fake /proc and a fixture sysfs, with a clock
// that stands at tick 1000.
func newTestEmulator(t *testing.T, proc *fakeProc, sysRoot, stateDir string) *Emulator {
	t.Helper()
	e, err := New(Options{StateDir: stateDir, ProcRoot: proc.root, SysRoot: sysRoot, now: func() uint64 { return 1000 }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

type callResult struct {
	Value int
	Errno string
}

func emuCall(e *Emulator, cmd, pid, nid int, ptr prctl.UserPointer) callResult {
	v, err := e.Call(cmd, pid, nid, ptr)
	r := callResult{Value: v}
	var errno unix.Errno
	if errors.As(err, &errno) {
		r.Errno = unix.ErrnoName(errno)
	} else if err != nil {
		r.Errno = err.Error()
	}
	return r
}

// callCase is one call of a table test, made by a caller with the given ids and
// capabilities (default: root with every capability).
type callCase struct {
	callerUID  uint32
	callerCaps string
	callerPrm  string // permitted set, if not callerCaps
	cmd, pid   int
	nid        int
	ptr        prctl.UserPointer
	want       callResult
}

// callTasks adds the tasks the call tables name to proc.
func callTasks(proc *fakeProc) {
	proc.task(100, 100, 500, 0, true)                   // root
	proc.task(200, 200, 500, 1000, true)                // uid 1000
	proc.task(300, 300, 500, 1000, false)               // uid 1000, not dumpable
	proc.task(11, 10, 500, 0, true)                     // another thread of the caller's group
	proc.task(12, 10, 500, 1000, false)                 // a thread of the caller's group with other ids
	proc.taskCaps(400, 400, 500, 0, true, capsNoPtrace) // root without CAP_SYS_PTRACE
}

func runCallTable(t *testing.T, proc *fakeProc, e *Emulator, tests map[string]callCase) {
	t.Helper()
	for _, name := range sortedKeys(tests) {
		tc := tests[name]
		t.Run(name, func(t *testing.T) {
			if tc.callerCaps == "" {
				tc.callerCaps = capsAll
			}
			if tc.callerPrm == "" {
				tc.callerPrm = tc.callerCaps
			}
			proc.callerCaps(10, tc.callerUID, tc.callerPrm, tc.callerCaps)
			if diff := cmp.Diff(tc.want, emuCall(e, tc.cmd, tc.pid, tc.nid, tc.ptr)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestEmulatorErrors: the patch's checks, in its order. The EPERM cases are refusals for a
// difference of uids, whatever the files' owners; TestEmulatorPtraceAccess (host tier) has
// the rest of the ptrace model.
func TestEmulatorErrors(t *testing.T) {
	proc := newFakeProc(t)
	callTasks(proc)
	e := newTestEmulator(t, proc, "testdata/sysfs/two-nodes", t.TempDir())
	s := prctl.PointerSentinel
	runCallTable(t, proc, e, map[string]callCase{
		"cmd 2 before an unknown pid": {cmd: 2, pid: 999, want: callResult{s, "ERANGE"}},
		"cmd -1 is huge":              {cmd: -1, pid: 100, want: callResult{s, "ERANGE"}},
		"unknown pid":                 {cmd: prctl.CmdGet, pid: 999, want: callResult{s, "ESRCH"}},
		"negative pid":                {cmd: prctl.CmdGet, pid: -100, want: callResult{s, "ESRCH"}},
		"unknown pid before bad node": {cmd: prctl.CmdSet, pid: 999, nid: 7, want: callResult{s, "ESRCH"}},
		"pid truncated to 32 bits":    {cmd: prctl.CmdGet, pid: 1<<32 + 100, ptr: prctl.PointerValid, want: callResult{-1, ""}},
		"misaligned pointer":          {cmd: prctl.CmdGet, pid: 100, ptr: prctl.PointerMisaligned, want: callResult{s, "EINVAL"}},
		"nil pointer":                 {cmd: prctl.CmdGet, pid: 100, ptr: prctl.PointerNil, want: callResult{s, "EFAULT"}},
		"SET ignores the pointer":     {cmd: prctl.CmdSet, pid: 11, nid: 1, ptr: prctl.PointerMisaligned, want: callResult{s, ""}},
		"node = num_possible_nodes()": {cmd: prctl.CmdSet, pid: 100, nid: 2, want: callResult{s, "EINVAL"}},
		"node -2":                     {cmd: prctl.CmdSet, pid: 100, nid: -2, want: callResult{s, "EINVAL"}},
		"node truncated to int: -1":   {cmd: prctl.CmdSet, pid: 11, nid: 1<<32 - 1, want: callResult{s, ""}},
		"EPERM before EFAULT":         {callerUID: 1000, callerCaps: capsNone, cmd: prctl.CmdGet, pid: 100, ptr: prctl.PointerNil, want: callResult{s, "EPERM"}},
		"EPERM before EINVAL for SET": {callerUID: 1000, callerCaps: capsNone, cmd: prctl.CmdSet, pid: 100, nid: 9, want: callResult{s, "EPERM"}},
	})
}

func TestEmulatorSparseNodes(t *testing.T) {
	proc := newFakeProc(t)
	proc.task(100, 100, 500, 0, true)
	e := newTestEmulator(t, proc, "testdata/sysfs/sparse", t.TempDir())
	// Possible nodes {0,2}: the patch compares with their count, 2.
	for nid, want := range map[int]string{-2: "EINVAL", -1: "", 0: "", 1: "", 2: "EINVAL", 3: "EINVAL"} {
		if got := emuCall(e, prctl.CmdSet, 100, nid, prctl.PointerNil); got.Errno != want {
			t.Errorf("SET %d: %q, want %q", nid, got.Errno, want)
		}
	}
}

func TestEmulatorNoNUMA(t *testing.T) {
	proc := newFakeProc(t)
	proc.task(100, 100, 500, 0, true)
	e := newTestEmulator(t, proc, "testdata/sysfs/no-numa", t.TempDir())
	if got := emuCall(e, prctl.CmdSet, 100, 0, prctl.PointerNil); got.Errno != "" {
		t.Errorf("SET 0 without NUMA: %q", got.Errno)
	}
	if got := emuCall(e, prctl.CmdSet, 100, 1, prctl.PointerNil); got.Errno != "EINVAL" {
		t.Errorf("SET 1 without NUMA: %q, want EINVAL", got.Errno)
	}
}

// TestEmulatorPersists: the state is the kernel's, and outlives the process using it.
func TestEmulatorPersists(t *testing.T) {
	proc := newFakeProc(t)
	proc.task(100, 100, 500, 0, true)
	proc.task(101, 100, 500, 0, true)
	dir := t.TempDir()
	e := newTestEmulator(t, proc, "testdata/sysfs/two-nodes", dir)
	if err := e.Set(100, 1); err != nil {
		t.Fatal(err)
	}
	if err := e.Set(101, 0); err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}

	again := newTestEmulator(t, proc, "testdata/sysfs/two-nodes", dir)
	for tid, want := range map[int]int{100: 1, 101: 0} {
		if got, err := again.Get(tid); err != nil || got != want {
			t.Errorf("Get(%d) after a restart = %d, %v; want %d", tid, got, err, want)
		}
	}
	// The view reads like /proc/<tid>/sched.
	view, err := numa.ReadSchedNUMA(filepath.Join(dir, "proc", "100", "task"), 101)
	if err != nil {
		t.Fatal(err)
	}
	if !view.ForcePresent || view.PreferredNIDForce != 0 || view.PreferredNID != 0 {
		t.Errorf("view of task 101 = %+v, want force 0, preferred 0", view)
	}
	s, err := again.SchedNUMA(100)
	if err != nil {
		t.Fatal(err)
	}
	if !s.ForcePresent || s.PreferredNIDForce != 1 || s.PreferredNID != 1 {
		t.Errorf("SchedNUMA(100) = %+v, want force 1, preferred 1", s)
	}
	// SET -1 clears both.
	if err := again.Set(100, -1); err != nil {
		t.Fatal(err)
	}
	if s, err = again.SchedNUMA(100); err != nil || s.PreferredNIDForce != -1 || s.PreferredNID != -1 {
		t.Errorf("SchedNUMA(100) after SET -1 = %+v, %v; want -1, -1", s, err)
	}
	if st := again.Stats(); st.Tasks != 2 || st.Listening {
		t.Errorf("Stats = %+v, want 2 tasks, not listening", st)
	}
}

// TestEmulatorRecycledPID: a task is its tid and its start time.
func TestEmulatorRecycledPID(t *testing.T) {
	proc := newFakeProc(t)
	proc.task(100, 100, 500, 0, true)
	e := newTestEmulator(t, proc, "testdata/sysfs/two-nodes", t.TempDir())
	if err := e.Set(100, 1); err != nil { // the first forced node: at tick 1000
		t.Fatal(err)
	}

	// The pid is reused by a task that started before anything was forced: it cannot
	// have inherited a node.
	proc.task(100, 100, 600, 0, true)
	if got, err := e.Get(100); err != nil || got != -1 {
		t.Errorf("Get of a recycled pid = %d, %v; want -1", got, err)
	}
	if n := e.Stats().AssumedFresh; n != 0 {
		t.Errorf("AssumedFresh = %d, want 0", n)
	}

	// Reused again after tick 1000, with nobody watching task creation: the emulator
	// cannot tell whether it inherited, assumes it fresh and counts it once.
	proc.task(100, 100, 2000, 0, true)
	for range 2 {
		if got, err := e.Get(100); err != nil || got != -1 {
			t.Errorf("Get of a recycled pid = %d, %v; want -1", got, err)
		}
	}
	if n := e.Stats().AssumedFresh; n != 1 {
		t.Errorf("AssumedFresh = %d, want 1", n)
	}
	// The task is gone: ESRCH.
	proc.remove(100)
	if _, err := e.Get(100); !errors.Is(err, unix.ESRCH) {
		t.Errorf("Get of an exited task: %v, want ESRCH", err)
	}
}

// TestEmulatorReboot: state from another boot is gone, as the kernel's would be.
func TestEmulatorReboot(t *testing.T) {
	proc := newFakeProc(t)
	proc.task(100, 100, 500, 0, true)
	dir := t.TempDir()
	e := newTestEmulator(t, proc, "testdata/sysfs/two-nodes", dir)
	if err := e.Set(100, 1); err != nil {
		t.Fatal(err)
	}
	e.Close()
	writeFile(t, filepath.Join(proc.root, "sys", "kernel", "random", "boot_id"), "boot-2\n")
	again := newTestEmulator(t, proc, "testdata/sysfs/two-nodes", dir)
	if got, err := again.Get(100); err != nil || got != -1 {
		t.Errorf("Get after a reboot = %d, %v; want -1", got, err)
	}
	if st := again.Stats(); st.Tasks != 0 {
		t.Errorf("Stats after a reboot = %+v, want no tasks", st)
	}
}

// TestEmulatorSweep: entries of tasks that exited go when an emulator opens the state.
func TestEmulatorSweep(t *testing.T) {
	proc := newFakeProc(t)
	proc.task(100, 100, 500, 0, true)
	proc.task(200, 200, 500, 0, true)
	dir := t.TempDir()
	e := newTestEmulator(t, proc, "testdata/sysfs/two-nodes", dir)
	for _, tid := range []int{100, 200} {
		if err := e.Set(tid, 1); err != nil {
			t.Fatal(err)
		}
	}
	proc.remove(200)
	again := newTestEmulator(t, proc, "testdata/sysfs/two-nodes", dir)
	if st := again.Stats(); st.Tasks != 1 {
		t.Errorf("Stats = %+v, want 1 task", st)
	}
	if _, err := os.Stat(filepath.Join(dir, "proc", "200")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the exited task's directory is still there: %v", err)
	}
}

// TestEmulatorOneWriter: several emulators (as in several processes) share the state; the
// lock keeps every update.
func TestEmulatorOneWriter(t *testing.T) {
	proc := newFakeProc(t)
	const perWriter = 40
	for i := range 2 * perWriter {
		proc.task(1000+i, 1000+i, 5000, 0, true) // born after the first force
	}
	proc.task(100, 100, 500, 0, true)
	dir := t.TempDir()
	emus := []*Emulator{
		newTestEmulator(t, proc, "testdata/sysfs/two-nodes", dir),
		newTestEmulator(t, proc, "testdata/sysfs/two-nodes", dir),
	}
	if err := emus[0].Set(100, 1); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for w, e := range emus {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perWriter {
				if _, err := e.Get(1000 + w*perWriter + i); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	if st := emus[1].Stats(); st.AssumedFresh != 2*perWriter || st.Tasks != 2*perWriter+1 {
		t.Errorf("Stats = %+v, want %d assumed fresh, %d tasks", st, 2*perWriter, 2*perWriter+1)
	}
	matches, _ := filepath.Glob(filepath.Join(dir, "proc", "*", "task", "*", ".*.tmp-*"))
	if len(matches) != 0 {
		t.Errorf("temporary files left: %v", matches)
	}
}

func TestEmulatorSharedStateModes(t *testing.T) {
	proc := newFakeProc(t)
	proc.task(100, 100, 500, 0, true)
	for _, shared := range []bool{false, true} {
		dir := filepath.Join(t.TempDir(), "state")
		e, err := New(Options{StateDir: dir, ProcRoot: proc.root, SysRoot: "testdata/sysfs/two-nodes", SharedState: shared})
		if err != nil {
			t.Fatal(err)
		}
		if err := e.Set(100, 1); err != nil {
			t.Fatal(err)
		}
		e.Close()
		wantDir, wantFile := os.FileMode(0o755), os.FileMode(0o644)
		if shared {
			wantDir, wantFile = 0o777, 0o666
		}
		for path, want := range map[string]os.FileMode{
			dir: wantDir, filepath.Join(dir, "proc", "100", "task", "100"): wantDir,
			filepath.Join(dir, "proc", "100", "task", "100", "sched"): wantFile, filepath.Join(dir, "meta.json"): wantFile,
		} {
			fi, err := os.Stat(path)
			if err != nil || fi.Mode().Perm() != want {
				t.Errorf("shared %v: %s: mode %v, %v; want %v", shared, path, fi.Mode().Perm(), err, want)
			}
		}
	}
}

// testListener is a listener without a socket, to feed events by hand.
func testListener(t *testing.T, e *Emulator) *listener {
	t.Helper()
	if e.page == nil {
		t.Fatal("no listener page")
	}
	return &listener{e: e, page: e.page}
}

func TestListenerThreadBorn(t *testing.T) {
	proc := newFakeProc(t)
	e := newTestEmulator(t, proc, "testdata/sysfs/two-nodes", t.TempDir())
	l := testListener(t, e)
	// Group 300: both older threads hold node 1. Group 400: they differ.
	for _, tid := range []int{300, 301} {
		proc.task(tid, 300, 50, 0, true)
		if err := e.Set(tid, 1); err != nil {
			t.Fatal(err)
		}
	}
	proc.task(400, 400, 50, 0, true)
	proc.task(401, 400, 50, 0, true)
	if err := e.Set(400, 1); err != nil {
		t.Fatal(err)
	}
	proc.task(302, 300, 60, 0, true)
	proc.task(303, 300, 70, 0, true) // born after 302: not its creator, whatever it holds
	if err := e.Set(303, 0); err != nil {
		t.Fatal(err)
	}
	proc.task(402, 400, 60, 0, true)
	for _, ev := range []numa.ProcEvent{
		{Kind: numa.ProcEventFork, ParentTID: 1, ParentTGID: 1, ChildTID: 302, ChildTGID: 300},
		{Kind: numa.ProcEventFork, ParentTID: 1, ParentTGID: 1, ChildTID: 402, ChildTGID: 400},
	} {
		if err := l.handle(ev); err != nil {
			t.Fatal(err)
		}
	}
	for tid, want := range map[int]int{302: 1, 402: -1} {
		if got, err := e.Get(tid); err != nil || got != want {
			t.Errorf("Get(%d) = %d, %v; want %d", tid, got, err, want)
		}
	}
	if st := e.Stats(); st.Inherited != 1 || st.AssumedFresh != 1 {
		t.Errorf("Stats = %+v, want 1 inherited, 1 assumed fresh", st)
	}
}

func TestListenerExec(t *testing.T) {
	proc := newFakeProc(t)
	e := newTestEmulator(t, proc, "testdata/sysfs/two-nodes", t.TempDir())
	l := testListener(t, e)
	// Group 100: leader and thread agree. Group 200: they differ; after exec, only the
	// leader's pid remains and it is unknown which thread lives on in it.
	for tid, tgid := range map[int]int{100: 100, 101: 100, 200: 200, 201: 200} {
		proc.task(tid, tgid, 50, 0, true)
	}
	for tid, nid := range map[int]int{100: 1, 101: 1, 200: 1, 201: 0} {
		if err := e.Set(tid, nid); err != nil {
			t.Fatal(err)
		}
	}
	proc.remove(101)
	proc.remove(201)
	for _, tgid := range []int{100, 200} {
		if err := l.handle(numa.ProcEvent{Kind: numa.ProcEventExec, ChildTID: tgid, ChildTGID: tgid}); err != nil {
			t.Fatal(err)
		}
	}
	for tid, want := range map[int]int{100: 1, 200: -1} {
		if got, err := e.Get(tid); err != nil || got != want {
			t.Errorf("Get(%d) after exec = %d, %v; want %d", tid, got, err, want)
		}
	}
	if st := e.Stats(); st.Tasks != 2 || st.AssumedFresh != 1 {
		t.Errorf("Stats = %+v, want 2 tasks, 1 assumed fresh", st)
	}
	// A thread's exit removes its entry; a leader's stays until it is stale.
	proc.task(102, 100, 60, 0, true)
	if err := e.Set(102, 1); err != nil {
		t.Fatal(err)
	}
	for _, ev := range []numa.ProcEvent{
		{Kind: numa.ProcEventExit, ChildTID: 102, ChildTGID: 100},
		{Kind: numa.ProcEventExit, ChildTID: 100, ChildTGID: 100},
	} {
		if err := l.handle(ev); err != nil {
			t.Fatal(err)
		}
	}
	if st := e.Stats(); st.Tasks != 2 {
		t.Errorf("Stats after exits = %+v, want 2 tasks", st)
	}
}

// TestListenerExecIgnoresRecycledEntries: a thread entry left by an earlier process with
// the same pid (its exit event lost) is not one of the exec'ing group's threads, and does
// not make their values look mixed.
func TestListenerExecIgnoresRecycledEntries(t *testing.T) {
	proc := newFakeProc(t)
	e := newTestEmulator(t, proc, "testdata/sysfs/two-nodes", t.TempDir())
	l := testListener(t, e)
	// The earlier process 500 and its thread 502, which held node 0; both end unseen.
	proc.task(500, 500, 10, 0, true)
	proc.task(502, 500, 10, 0, true)
	if err := e.Set(502, 0); err != nil {
		t.Fatal(err)
	}
	proc.remove(502)
	proc.remove(500)
	// The new process 500, whose two threads hold node 1; one exits as the other execs.
	proc.task(500, 500, 50, 0, true)
	proc.task(501, 500, 50, 0, true)
	for _, tid := range []int{500, 501} {
		if err := e.Set(tid, 1); err != nil {
			t.Fatal(err)
		}
	}
	proc.remove(501)
	if err := l.handle(numa.ProcEvent{Kind: numa.ProcEventExec, ChildTID: 500, ChildTGID: 500}); err != nil {
		t.Fatal(err)
	}
	if got, err := e.Get(500); err != nil || got != 1 {
		t.Errorf("Get(500) after exec = %d, %v; want 1", got, err)
	}
	if st := e.Stats(); st.AssumedFresh != 0 {
		t.Errorf("Stats = %+v, want none assumed fresh", st)
	}
}

func TestListenerLostEvents(t *testing.T) {
	proc := newFakeProc(t)
	e := newTestEmulator(t, proc, "testdata/sysfs/two-nodes", t.TempDir())
	l := testListener(t, e)
	if err := l.handle(numa.ProcEvent{Kind: numa.ProcEventLost}); err != nil {
		t.Fatal(err)
	}
	if got := e.Stats().EventsLost; got != 1 {
		t.Errorf("EventsLost = %d, want 1", got)
	}
	if got := *e.page.u64(offWatchSince); got != 1000 {
		t.Errorf("watchSince = %d, want the current tick 1000", got)
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func TestEmulatorCallsAfterCloseFail(t *testing.T) {
	e, err := New(Options{StateDir: t.TempDir(), ForkEvents: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Get(os.Getpid()); err != nil {
		t.Fatalf("GET before Close: %v", err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Get(os.Getpid()); !errors.Is(err, errClosed) {
		t.Errorf("GET after Close = %v, want errClosed", err)
	}
	if err := e.Set(os.Getpid(), 0); !errors.Is(err, errClosed) {
		t.Errorf("SET after Close = %v, want errClosed", err)
	}
}

// TestListenerCloneTrace: with task_newtask events, a CLONE_VM child inherits even after it
// has exec'ed, a fork() child holds the default, a thread inherits from the thread that
// made it, and a CLONE_PARENT child from its creator; a birth the trace may have lost falls
// back to guessing. (Fake pids beyond any pid_max, so kcmp finds no real task.)
func TestListenerCloneTrace(t *testing.T) {
	const (
		parent      = 3_000_500
		vforkChild  = 3_000_501
		forkChild   = 3_000_502
		lostChild   = 3_000_503
		group       = 3_000_600
		groupThread = 3_000_601
		newThread   = 3_000_602
		adopted     = 3_000_701
		sec         = uint64(1_000_000_000)
	)
	proc := newFakeProc(t)
	e := newTestEmulator(t, proc, "testdata/sysfs/two-nodes", t.TempDir())
	l := testListener(t, e)
	l.trace = &cloneTrace{pipe: -1, log: newBirthLog(uint64(cloneTraceHorizon / time.Microsecond))}
	proc.task(parent, parent, 50, 0, true)
	proc.task(group, group, 50, 0, true)
	proc.task(groupThread, group, 55, 0, true)
	for tid, nid := range map[int]int{parent: 1, group: 1, groupThread: 0} {
		if err := e.Set(tid, nid); err != nil {
			t.Fatal(err)
		}
	}
	for _, tid := range []int{vforkChild, forkChild, lostChild, adopted} {
		proc.task(tid, tid, 60, 0, true)
	}
	proc.task(newThread, group, 60, 0, true)

	births := []traceBirth{
		{PID: vforkChild, Creator: parent, Flags: 0x4111, TimeUs: 10_000_005},
		{PID: forkChild, Creator: parent, Flags: 0x11, TimeUs: 11_000_005},
		{PID: newThread, Creator: groupThread, Flags: 0x3d0f00, TimeUs: 12_000_005},
		{PID: adopted, Creator: parent, Flags: 0x8111, TimeUs: 13_000_005}, // CLONE_PARENT|CLONE_VM
	}
	for _, b := range births {
		l.trace.log.add(b, traceLineBirth, b.TimeUs)
	}
	// Events lost up to 5 s: lostChild, born at 4 s, cannot be vouched for.
	l.trace.log.add(traceBirth{}, traceLineLost, 5_000_000)
	for _, ev := range []numa.ProcEvent{
		{Kind: numa.ProcEventFork, ParentTID: parent, ParentTGID: parent, ChildTID: lostChild, ChildTGID: lostChild, TimestampNs: 4 * sec},
		{Kind: numa.ProcEventFork, ParentTID: parent, ParentTGID: parent, ChildTID: vforkChild, ChildTGID: vforkChild, TimestampNs: 10 * sec},
		{Kind: numa.ProcEventFork, ParentTID: parent, ParentTGID: parent, ChildTID: forkChild, ChildTGID: forkChild, TimestampNs: 11 * sec},
		{Kind: numa.ProcEventFork, ParentTID: 1, ParentTGID: 1, ChildTID: newThread, ChildTGID: group, TimestampNs: 12 * sec},
		{Kind: numa.ProcEventFork, ParentTID: 1, ParentTGID: 1, ChildTID: adopted, ChildTGID: adopted, TimestampNs: 13 * sec},
	} {
		if err := l.handle(ev); err != nil {
			t.Fatalf("handling %+v: %v", ev, err)
		}
	}
	got := map[string]int{}
	for name, tid := range map[string]int{"vfork child": vforkChild, "fork child": forkChild, "lost child": lostChild, "new thread": newThread, "adopted": adopted} {
		v, err := e.Get(tid)
		if err != nil {
			t.Fatalf("Get(%s): %v", name, err)
		}
		got[name] = v
	}
	want := map[string]int{"vfork child": 1, "fork child": -1, "lost child": -1, "new thread": 0, "adopted": 1}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("values (-want +got):\n%s", diff)
	}
	if st := e.Stats(); st.Inherited != 3 || st.AssumedFresh != 1 {
		t.Errorf("Stats = %+v, want 3 inherited, 1 assumed fresh (the lost child)", st)
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// ViewedForce reads a task's forced node from a view by state directory: the entry of that
// very task, -1 for an earlier task's entry under the same tid, or for none.
func TestViewedForce(t *testing.T) {
	dir := t.TempDir()
	entry := taskEntry{TID: 12, TGID: 10, Start: 500, Force: 1, Preferred: 1, Origin: originSet}
	path := filepath.Join(dir, "proc", "10", "task", "12", "sched")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, entry.format(), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		tgid int
		task numa.Task
		want int
	}{
		{"its entry", 10, numa.Task{TID: 12, StartTime: 500}, 1},
		{"a recycled tid", 10, numa.Task{TID: 12, StartTime: 501}, numa.NoNode},
		{"no entry", 10, numa.Task{TID: 13, StartTime: 500}, numa.NoNode},
		{"another group", 11, numa.Task{TID: 12, StartTime: 500}, numa.NoNode},
	} {
		got, err := ViewedForce(dir, tc.tgid, tc.task)
		if err != nil || got != tc.want {
			t.Errorf("%s: ViewedForce = %d, %v; want %d", tc.name, got, err, tc.want)
		}
	}
}

// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build linux && host

package emulator

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/numapref/numapref/internal/numa/prctl"
	"github.com/numapref/numapref/internal/testutil/poll"
	"github.com/numapref/numapref/internal/testutil/testenv"
)

// newOwnedFakeProc is a fakeProc whose status files belong to the uids a task's
// dumpability implies; chown needs root.
func newOwnedFakeProc(t *testing.T) *fakeProc {
	testenv.RequireRoot(t)
	f := newFakeProc(t)
	f.owned = true
	return f
}

// TestEmulatorPtraceAccess: the ptrace model, with each task's dumpability read from the
// owner of its status file.
func TestEmulatorPtraceAccess(t *testing.T) {
	proc := newOwnedFakeProc(t)
	callTasks(proc)
	e := newTestEmulator(t, proc, "testdata/sysfs/two-nodes", t.TempDir())
	s := prctl.PointerSentinel
	runCallTable(t, proc, e, map[string]callCase{
		"uid 1000 on root":            {callerUID: 1000, callerCaps: capsNone, cmd: prctl.CmdGet, pid: 100, ptr: prctl.PointerValid, want: callResult{s, "EPERM"}},
		"uid 1000 on uid 1000":        {callerUID: 1000, callerCaps: capsNone, cmd: prctl.CmdGet, pid: 200, ptr: prctl.PointerValid, want: callResult{-1, ""}},
		"uid 1000 on non-dumpable":    {callerUID: 1000, callerCaps: capsNone, cmd: prctl.CmdGet, pid: 300, ptr: prctl.PointerValid, want: callResult{s, "EPERM"}},
		"own thread group always":     {callerUID: 1000, callerCaps: capsNone, cmd: prctl.CmdGet, pid: 12, ptr: prctl.PointerValid, want: callResult{-1, ""}},
		"root without CAP_SYS_PTRACE": {callerUID: 0, callerCaps: capsNoPtrace, cmd: prctl.CmdGet, pid: 200, ptr: prctl.PointerValid, want: callResult{s, "EPERM"}},
		// cap_ptrace_access_check: the target's permitted set must be a subset of the caller's.
		"root without it on root holding it":       {callerUID: 0, callerCaps: capsNoPtrace, cmd: prctl.CmdGet, pid: 100, ptr: prctl.PointerValid, want: callResult{s, "EPERM"}},
		"root without it SET on root holding it":   {callerUID: 0, callerCaps: capsNoPtrace, cmd: prctl.CmdSet, pid: 100, nid: 9, want: callResult{s, "EPERM"}},
		"root without it on root without it":       {callerUID: 0, callerCaps: capsNoPtrace, cmd: prctl.CmdGet, pid: 400, ptr: prctl.PointerValid, want: callResult{-1, ""}},
		"root with it permitted only, on root":     {callerUID: 0, callerCaps: capsNoPtrace, callerPrm: capsAll, cmd: prctl.CmdGet, pid: 100, ptr: prctl.PointerValid, want: callResult{-1, ""}},
		"root with it permitted only, on uid 1000": {callerUID: 0, callerCaps: capsNoPtrace, callerPrm: capsAll, cmd: prctl.CmdGet, pid: 200, ptr: prctl.PointerValid, want: callResult{s, "EPERM"}},
		"uid 1000 on root without it":              {callerUID: 1000, callerCaps: capsNone, cmd: prctl.CmdGet, pid: 400, ptr: prctl.PointerValid, want: callResult{s, "EPERM"}},
		"root with it on non-dumpable":             {callerUID: 0, callerCaps: capsAll, cmd: prctl.CmdGet, pid: 300, ptr: prctl.PointerValid, want: callResult{-1, ""}},
	})
}

// TestEmulatorCloneTraceFallback: without tracefs the listener still works, says so, and
// reports no clone trace.
func TestEmulatorCloneTraceFallback(t *testing.T) {
	e, err := New(Options{StateDir: t.TempDir(), ForkEvents: true, TracefsRoot: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	st := e.Stats()
	testenv.Require(t, st.Listening, "the proc connector (CAP_NET_ADMIN, CONFIG_PROC_EVENTS): "+e.Support().Reason, "sudo make host")
	if st.CloneTrace {
		t.Errorf("CloneTrace with a TracefsRoot that is not tracefs")
	}
	if r := e.Support().Reason; !strings.Contains(r, "without clone flags") || !strings.Contains(r, "tracefs is not mounted there") {
		t.Errorf("Support().Reason = %q, want it to say why there are no clone flags", r)
	}
}

// TestEmulatorCloneTrace: on this machine's kernel, the listener's trace instance sees a
// vfork child that exec'ed at once inherit, and the instance is gone after Close.
func TestEmulatorCloneTrace(t *testing.T) {
	e, err := New(Options{StateDir: t.TempDir(), ForkEvents: true})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	st := e.Stats()
	testenv.Require(t, st.Listening && st.CloneTrace,
		"the proc connector (CAP_NET_ADMIN) and tracefs (mounted, or CAP_SYS_ADMIN to mount one): "+e.Support().Reason, "sudo make host")
	instance := e.listener.trace.instance
	tracefs := e.listener.trace.source
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := e.Set(0, 0); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = e.Set(0, -1) }()
	before := e.Stats()
	// os/exec: clone(CLONE_VM|CLONE_VFORK) by this thread, exec at once; the child (this
	// binary as the clone trace helper, see TestMain) then waits on its stdin, so it is
	// alive, exec'ed, when it is asked about.
	cmd := exec.Command(os.Args[0], cloneTraceHelperArg)
	cmd.Env = append(os.Environ(), cloneTraceHelperEnv+"=1")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { stdin.Close(); cmd.Wait() }()
	// Before the exec, the vfork child's command line is its parent's.
	poll.NoError(t, 5*time.Second, "the vfork child's exec", func() error {
		args, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", cmd.Process.Pid))
		if !strings.Contains(string(args), cloneTraceHelperArg) {
			return fmt.Errorf("cmdline %q", args)
		}
		return nil
	})
	if got, err := e.Get(cmd.Process.Pid); err != nil || got != 0 {
		t.Errorf("Get(exec'ed vfork child) = %d, %v; want 0", got, err)
	}
	// The listener counts the inheritance right after it writes the child's entry, which a
	// GET may read first. (The first os/exec of a process may also vfork a probe child,
	// which inherits too.)
	var after Stats
	_ = poll.Until(2*time.Second, func() error { // the assertion below says what is wrong
		if after = e.Stats(); after.Inherited <= before.Inherited {
			return errors.New("no inheritance counted")
		}
		return nil
	})
	if after.AssumedFresh != before.AssumedFresh || after.Inherited <= before.Inherited {
		t.Errorf("Stats before %+v, after %+v: want more inherited, no assumption", before, after)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(tracefs, "/") {
		t.Logf("instance %s was in %s: gone with the emulator", instance, tracefs)
		return
	}
	if _, err := os.Stat(filepath.Join(tracefs, instance)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("trace instance %s left after Close: %v", instance, err)
	}
	t.Logf("instance %s/%s removed at Close", tracefs, instance)
}

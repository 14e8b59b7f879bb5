// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build linux

package conformance

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/numapref/numapref/internal/numa"
	"github.com/numapref/numapref/internal/numa/prctl"
)

// Environment of helper processes.
const (
	envRequest = "NUMAPREF_CONFORMANCE_REQUEST" // a helperRequest, JSON; set only in helpers
	envShared  = "NUMAPREF_CONFORMANCE_SHARED"  // a directory the test and its helpers share
	envBinary  = "NUMAPREF_CONFORMANCE_BINARY"  // the test binary, executable by every uid
	envReport  = "NUMAPREF_CONFORMANCE_REPORT"  // file for the JSON lines (optional)

	resultPrefix = "NUMAPREF-CONFORMANCE-RESULT "
)

// Helper roles.
const (
	roleReportSelf = "report-self" // GET of the calling thread, and its sched lines
	roleCalls      = "calls"       // the given calls
	roleSleeper    = "sleeper"     // a target: report, then wait for stdin to close
	roleSpawn      = "spawn"       // force every thread, then make a task (Spawn says how)
)

// How roleSpawn makes the task that must (or must not) inherit.
const (
	spawnFork    = "fork"     // clone() without CLONE_VM, held before exec
	spawnCloneVM = "clone-vm" // clone(CLONE_VM), held before exec
	spawnOSExec  = "os-exec"  // Go's os/exec (CLONE_VM|CLONE_VFORK), not held
	spawnThreads = "threads"  // new threads
	spawnExec    = "exec"     // execve of the helper itself
)

type helperRequest struct {
	Role string `json:"role"`
	// Test is the top-level test the helper re-runs to reach Run.
	Test          string     `json:"test"`
	Nid           int        `json:"nid,omitempty"`
	Spawn         string     `json:"spawn,omitempty"`
	Calls         []callSpec `json:"calls,omitempty"`
	DropPtraceCap bool       `json:"dropPtraceCap,omitempty"`
	// DropPtraceCapEffective drops CAP_SYS_PTRACE from the effective set only.
	DropPtraceCapEffective bool `json:"dropPtraceCapEffective,omitempty"`
	NonDumpable            bool `json:"nonDumpable,omitempty"`
}

type callSpec struct {
	Label  string            `json:"label"`
	Cmd    int               `json:"cmd"`
	PID    int               `json:"pid"`
	Target string            `json:"target"` // the pid's name in reports
	Nid    int               `json:"nid"`
	Ptr    prctl.UserPointer `json:"ptr"`
}

type helperResult struct {
	Role     string          `json:"role"`
	PID      int             `json:"pid"`
	TID      int             `json:"tid"`
	Calls    []CallResult    `json:"calls,omitempty"`
	Sched    *numa.SchedNUMA `json:"sched,omitempty"`
	Observed map[string]int  `json:"observed,omitempty"`
	Error    string          `json:"error,omitempty"`
}

func (r helperResult) call(label string) (CallResult, bool) {
	for _, c := range r.Calls {
		if c.Label == label {
			return c, true
		}
	}
	return CallResult{}, false
}

func doCall(raw prctl.Raw, spec callSpec) CallResult {
	v, err := raw.Call(spec.Cmd, spec.PID, spec.Nid, spec.Ptr)
	r := CallResult{Label: spec.Label, Cmd: spec.Cmd, Target: spec.Target, Nid: spec.Nid, Ptr: spec.Ptr.String(),
		Stored: v != prctl.PointerSentinel, Value: v}
	if err != nil {
		r.Ret, r.Errno = -1, errnoName(err)
	}
	return r
}

func errnoName(err error) string {
	var errno unix.Errno
	if errors.As(err, &errno) {
		if name := unix.ErrnoName(errno); name != "" {
			return name
		}
		return "errno " + strconv.Itoa(int(errno))
	}
	return "error: " + err.Error()
}

// runHelper plays the helper's part in this (re-executed) process and prints the result.
func runHelper(t *testing.T, open func(t *testing.T) Target, req helperRequest) {
	// Calls with pid 0 name the calling thread: keep to one. The goroutine never unlocks,
	// so the thread (and whatever it was set to) ends with the helper.
	runtime.LockOSThread()
	res := helperResult{Role: req.Role, PID: os.Getpid(), TID: unix.Gettid()}
	target := open(t)
	if err := helperRole(target.Raw, req, &res); err != nil {
		res.Error = err.Error()
	}
	emitResult(res)
}

func emitResult(res helperResult) {
	line, _ := json.Marshal(res)
	fmt.Fprintf(os.Stdout, "\n%s%s\n", resultPrefix, line)
}

func helperRole(raw prctl.Raw, req helperRequest, res *helperResult) error {
	if req.DropPtraceCap || req.DropPtraceCapEffective {
		if err := dropPtraceCap(req.DropPtraceCap); err != nil {
			return err
		}
	}
	switch req.Role {
	case roleReportSelf:
		res.Calls = append(res.Calls, doCall(raw, callSpec{Label: "get-self", Cmd: prctl.CmdGet, Target: "self", Ptr: prctl.PointerValid}))
		s, err := raw.SchedNUMA(res.TID)
		if err != nil {
			return err
		}
		res.Sched = &s
	case roleCalls:
		for _, spec := range req.Calls {
			res.Calls = append(res.Calls, doCall(raw, spec))
		}
	case roleSleeper:
		if req.NonDumpable {
			if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
				return err
			}
		}
		emitResult(*res)
		_, _ = io.Copy(io.Discard, os.Stdin) // until the test closes stdin
		os.Exit(0)
	case roleSpawn:
		if err := setAllThreads(raw, req.Nid); err != nil {
			return err
		}
		return spawnRole(raw, req, res)
	default:
		return fmt.Errorf("unknown helper role %q", req.Role)
	}
	return nil
}

func spawnRole(raw prctl.Raw, req helperRequest, res *helperResult) error {
	childReq := helperRequest{Role: roleReportSelf, Test: req.Test}
	argv, env, err := helperArgs(childReq)
	if err != nil {
		return err
	}
	switch req.Spawn {
	case spawnFork, spawnCloneVM:
		child, err := spawnHeld(req.Spawn == spawnCloneVM, argv[0], argv, env)
		if err != nil {
			return err
		}
		// While held, a CLONE_VM child still runs in this process's memory.
		res.Calls = append(res.Calls, doCall(raw, callSpec{Label: "get-child-before-exec", Cmd: prctl.CmdGet, PID: child.pid, Target: "child", Ptr: prctl.PointerValid}))
		if err := child.release(); err != nil {
			return err
		}
		ws, err := child.wait()
		if err != nil {
			return err
		}
		if ws.ExitStatus() != 0 {
			return fmt.Errorf("child exited with %v", ws)
		}
	case spawnOSExec:
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Env, cmd.Stdout, cmd.Stderr = env, os.Stdout, os.Stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("running child: %w", err)
		}
	case spawnThreads:
		return threadsRole(raw, res)
	case spawnExec:
		os.Stdout.Sync()
		return syscall.Exec(argv[0], argv, env)
	default:
		return fmt.Errorf("unknown spawn %q", req.Spawn)
	}
	return nil
}

// setAllThreads forces every thread of this process to nid, including threads that appear
// meanwhile, so that whichever thread creates the next task has nid.
func setAllThreads(raw prctl.Raw, nid int) error {
	done := map[int]bool{}
	for range 100 {
		tids, err := threadIDs()
		if err != nil {
			return err
		}
		fresh := 0
		for _, tid := range tids {
			if done[tid] {
				continue
			}
			fresh++
			done[tid] = true
			if _, err := raw.Call(prctl.CmdSet, tid, nid, prctl.PointerNil); err != nil && !errors.Is(err, unix.ESRCH) {
				return fmt.Errorf("setting thread %d to %d: %w", tid, nid, err)
			}
		}
		if fresh == 0 {
			return nil
		}
	}
	return errors.New("threads keep appearing")
}

func threadIDs() ([]int, error) {
	entries, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return nil, err
	}
	var tids []int
	for _, e := range entries {
		if tid, err := strconv.Atoi(e.Name()); err == nil {
			tids = append(tids, tid)
		}
	}
	return tids, nil
}

// threadsRole makes new threads (more locked goroutines than there are threads forces
// the runtime to create some) and reports the value of three of them, read from this
// thread and from the new thread itself.
func threadsRole(raw prctl.Raw, res *helperResult) error {
	before, err := threadIDs()
	if err != nil {
		return err
	}
	old := map[int]bool{}
	for _, tid := range before {
		old[tid] = true
	}
	type thread struct {
		tid  int
		self CallResult
	}
	started := make(chan thread)
	stop := make(chan struct{})
	defer close(stop)
	for range len(before) + 3 {
		go func() {
			runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
			tid := unix.Gettid()
			started <- thread{tid: tid, self: doCall(raw, callSpec{Label: "get-thread-self", Cmd: prctl.CmdGet, Target: "new-thread", Ptr: prctl.PointerValid})}
			<-stop
		}()
	}
	// len(before)+3 locked goroutines need at least 3 threads that did not exist: report
	// exactly 3 (how many more the runtime makes varies from run to run, and the two
	// backends' reports are compared call for call).
	const reported = 3
	n := 0
	for range len(before) + 3 {
		th := <-started
		if old[th.tid] || n == reported {
			continue
		}
		n++
		self := th.self
		self.Label = fmt.Sprintf("new-thread-%d-get-self", n)
		res.Calls = append(res.Calls, self)
		res.Calls = append(res.Calls, doCall(raw, callSpec{Label: fmt.Sprintf("new-thread-%d-get", n), Cmd: prctl.CmdGet, PID: th.tid, Target: "new-thread", Ptr: prctl.PointerValid}))
	}
	res.Observed = map[string]int{"newThreads": n}
	if n == 0 {
		return errors.New("no new thread was created")
	}
	return nil
}

// dropPtraceCap removes CAP_SYS_PTRACE from this thread's effective set and, if permitted,
// from its permitted set too: root without it in its effective set is just another uid to
// ptrace_may_access, and the permitted set is what cap_ptrace_access_check compares.
func dropPtraceCap(permitted bool) error {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return fmt.Errorf("capget: %w", err)
	}
	data[0].Effective &^= 1 << unix.CAP_SYS_PTRACE
	if permitted {
		data[0].Permitted &^= 1 << unix.CAP_SYS_PTRACE
	}
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("capset: %w", err)
	}
	return nil
}

// helperArgs returns the command line and environment that re-run this test binary as a
// helper for req.
func helperArgs(req helperRequest) (argv, env []string, err error) {
	bin := os.Getenv(envBinary)
	if bin == "" {
		return nil, nil, errors.New("no helper binary: not under conformance.Run")
	}
	data, err := json.Marshal(req)
	if err != nil {
		return nil, nil, err
	}
	argv = []string{bin, "-test.run=^" + regexp.QuoteMeta(req.Test) + "$", "-test.count=1", "-test.timeout=2m"}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, envRequest+"=") {
			env = append(env, kv)
		}
	}
	return argv, append(env, envRequest+"="+string(data)), nil
}

func parseResults(out string) []helperResult {
	var results []helperResult
	for line := range strings.Lines(out) {
		data, ok := strings.CutPrefix(strings.TrimSpace(line), resultPrefix)
		if !ok {
			continue
		}
		var r helperResult
		if json.Unmarshal([]byte(data), &r) == nil {
			results = append(results, r)
		}
	}
	return results
}

// helperCommand prepares a helper process, as cred if not nil.
func helperCommand(req helperRequest, cred *syscall.Credential) (*exec.Cmd, error) {
	argv, env, err := helperArgs(req)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env, cmd.Dir = env, "/"
	if cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	}
	return cmd, nil
}

// runHelperProcess runs a helper to completion and returns every result it (and its
// children, which share its stdout) printed.
func runHelperProcess(t *testing.T, req helperRequest, cred *syscall.Credential) []helperResult {
	t.Helper()
	cmd, err := helperCommand(req, cred)
	if err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	results := parseResults(stdout.String())
	for _, r := range results {
		if r.Error != "" {
			t.Errorf("helper %s (pid %d) failed: %s", r.Role, r.PID, r.Error)
		}
	}
	if runErr != nil || len(results) == 0 {
		t.Fatalf("helper %s/%s: %v\nstdout:\n%s\nstderr:\n%s", req.Role, req.Spawn, runErr, stdout.String(), stderr.String())
	}
	return results
}

// sleeper is a helper process that only serves as a target.
type sleeper struct {
	pid int
}

// startSleeper starts a sleeper as cred (nil: as this process) and waits until it is
// ready. It ends with the test.
func startSleeper(t *testing.T, test string, cred *syscall.Credential, nonDumpable bool) sleeper {
	t.Helper()
	cmd, err := helperCommand(helperRequest{Role: roleSleeper, Test: test, NonDumpable: nonDumpable}, cred)
	if err != nil {
		t.Fatal(err)
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close()
		_ = cmd.Wait()
	})
	ready := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), resultPrefix) {
				ready <- nil
				_, _ = io.Copy(io.Discard, stdout)
				return
			}
		}
		ready <- errors.New("sleeper ended before it was ready")
	}()
	select {
	case err := <-ready:
		if err != nil {
			t.Fatalf("%v\nstderr:\n%s", err, stderr.String())
		}
	case <-time.After(time.Minute):
		t.Fatal("sleeper not ready within a minute")
	}
	return sleeper{pid: cmd.Process.Pid}
}

// helperBinary returns the running test binary, or a copy of it in shared when some uid
// could not execute it (go test builds into a directory only its owner can enter).
func helperBinary(shared string) (string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", err
	}
	if worldExecutable(exe) {
		return exe, nil
	}
	dir := filepath.Join(shared, "bin")
	if err := os.Mkdir(dir, 0o755); err != nil {
		return "", err
	}
	dst := filepath.Join(dir, filepath.Base(exe))
	return dst, copyFile(exe, dst, 0o755)
}

func worldExecutable(path string) bool {
	for p := path; ; p = filepath.Dir(p) {
		fi, err := os.Stat(p)
		if err != nil || fi.Mode().Perm()&0o001 == 0 {
			return false
		}
		if p == filepath.Dir(p) {
			return true
		}
	}
}

func copyFile(src, dst string, mode os.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

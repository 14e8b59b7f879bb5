// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build host && linux && (amd64 || arm64)

package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"

	"github.com/numapref/numapref/internal/testutil/testenv"
)

// A filter cannot be removed, so each case runs in a child: the test binary again, with
// NUMAPREF_SANDBOX_CHILD naming what the child does (install, or not), and the pid of
// a sleeping sibling to aim at in NUMAPREF_SANDBOX_TARGET.
const (
	childEnv  = "NUMAPREF_SANDBOX_CHILD"
	targetEnv = "NUMAPREF_SANDBOX_TARGET"
)

func TestMain(m *testing.M) {
	if mode := os.Getenv(childEnv); mode != "" {
		os.Exit(runChild(mode))
	}
	if spec := os.Getenv(agentChildEnv); spec != "" {
		os.Exit(runAgentChild(spec))
	}
	os.Exit(m.Run())
}

// runChild installs the filter (mode "filter", "filter+kcmp") or not ("none"), makes
// each call of probeCalls, and prints what each returned as JSON.
func runChild(mode string) int {
	target, err := strconv.Atoi(os.Getenv(targetEnv))
	if err != nil {
		fmt.Fprintln(os.Stderr, "no target pid:", err)
		return 2
	}
	if mode != "none" {
		if _, err := installSeccomp(Options{AllowKcmp: mode == "filter+kcmp"}); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 3
		}
	}
	got := map[string]string{}
	for name, call := range probeCalls(target) {
		got[name] = errName(call())
	}
	if err := json.NewEncoder(os.Stdout).Encode(got); err != nil {
		return 4
	}
	return 0
}

func errName(err error) string {
	var errno unix.Errno
	switch {
	case err == nil:
		return "ok"
	case errors.As(err, &errno):
		return unix.ErrnoName(errno)
	default:
		return err.Error()
	}
}

// probeCalls are the calls the children make: on the sleeping sibling target (which the
// filter must refuse) and on the child itself (which it must not).
func probeCalls(target int) map[string]func() error {
	return map[string]func() error{
		"seccomp mode of every thread": func() error { return allThreads("Seccomp:", "2") },
		"no_new_privs of every thread": func() error { return allThreads("NoNewPrivs:", "1") },
		"ptrace(PTRACE_ATTACH, other)": func() error {
			err := unix.PtraceAttach(target)
			if err == nil {
				_ = unix.PtraceDetach(target)
			}
			return err
		},
		"process_vm_writev(other)": func() error {
			local := []unix.Iovec{{Base: new(byte), Len: 1}}
			remote := []unix.RemoteIovec{{Base: 0, Len: 1}} // address 0: nothing is written
			_, err := unix.ProcessVMWritev(target, local, remote, 0)
			return err
		},
		"pidfd_getfd(other)": func() error {
			return withPidfd(target, func(fd int) error { return closeFD(unix.PidfdGetfd(fd, 0, 0)) })
		},
		"pidfd_send_signal(other)": func() error {
			return withPidfd(target, func(fd int) error { return unix.PidfdSendSignal(fd, 0, nil, 0) })
		},
		"kill(other, 0)":           func() error { return unix.Kill(target, 0) },
		"kill(0, 0)":               func() error { return unix.Kill(0, 0) },
		"tgkill(other, other, 0)":  func() error { return unix.Tgkill(target, target, 0) },
		"sched_setaffinity(other)": func() error { return setSameAffinity(target) },
		"fcntl(F_SETOWN, other)":   func() error { _, err := unix.FcntlInt(0, unix.F_SETOWN, target); return err },
		"mount":                    func() error { return unix.Mount("none", "/nonexistent-numapref", "tmpfs", 0, "") },
		"kcmp(self, other)": func() error {
			_, _, errno := unix.Syscall6(unix.SYS_KCMP, uintptr(os.Getpid()), uintptr(target), 1 /* KCMP_VM */, 0, 0, 0)
			return errnoErr(errno)
		},
		"kill(self, 0)":                func() error { return unix.Kill(os.Getpid(), 0) },
		"kill(self, SIGUSR1) received": signalSelf,
		"tgkill(self, own thread, 0)":  func() error { return unix.Tgkill(os.Getpid(), unix.Gettid(), 0) },
		"sched_setaffinity(0)":         func() error { return setSameAffinity(0) },
		"fcntl(F_GETFL)":               func() error { _, err := unix.FcntlInt(0, unix.F_GETFL, 0); return err },
		"read /proc/1/status": func() error {
			_, err := os.ReadFile("/proc/1/status")
			return err
		},
		"pidfd_open(other)": func() error { return withPidfd(target, func(int) error { return nil }) },
	}
}

// allThreads checks a line of /proc/self/task/*/status on every thread: TSYNC must have
// given the filter to the threads the runtime started before the install.
func allThreads(key, want string) error {
	paths, err := filepath.Glob("/proc/self/task/*/status")
	if err != nil || len(paths) < 2 {
		return fmt.Errorf("listing threads: %d found, %v", len(paths), err)
	}
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if got := statusField(string(data), key); got != want {
			return fmt.Errorf("%s %s %q", p, key, got)
		}
	}
	return nil
}

func statusField(status, key string) string {
	for line := range strings.Lines(status) {
		if value, ok := strings.CutPrefix(line, key); ok {
			return strings.TrimSpace(value)
		}
	}
	return ""
}

func withPidfd(pid int, f func(fd int) error) error {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return fmt.Errorf("pidfd_open: %w", err)
	}
	defer unix.Close(fd)
	return f(fd)
}

func closeFD(fd int, err error) error {
	if err == nil {
		unix.Close(fd)
	}
	return err
}

func errnoErr(errno unix.Errno) error {
	if errno != 0 {
		return errno
	}
	return nil
}

// setSameAffinity sets pid's CPU mask to the one it has: a change of nothing.
func setSameAffinity(pid int) error {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(pid, &set); err != nil {
		return fmt.Errorf("sched_getaffinity: %w", err)
	}
	return unix.SchedSetaffinity(pid, &set)
}

// signalSelf sends itself SIGUSR1 with kill(2) and waits for it to arrive.
func signalSelf() error {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGUSR1)
	defer signal.Stop(ch)
	if err := unix.Kill(os.Getpid(), unix.SIGUSR1); err != nil {
		return err
	}
	select {
	case <-ch:
		return nil
	case <-time.After(10 * time.Second): // a bound on a wait that normally takes microseconds
		return errors.New("SIGUSR1 never arrived")
	}
}

func TestFilterInAChild(t *testing.T) {
	testenv.RequireRoot(t) // ptrace attach, pidfd_getfd and mount need privileges: their refusal must be the filter's
	refused := map[string]string{
		"ptrace(PTRACE_ATTACH, other)": "EPERM",
		"process_vm_writev(other)":     "EPERM",
		"pidfd_getfd(other)":           "EPERM",
		"pidfd_send_signal(other)":     "EPERM",
		"kill(other, 0)":               "EPERM",
		"kill(0, 0)":                   "EPERM",
		"tgkill(other, other, 0)":      "EPERM",
		"sched_setaffinity(other)":     "EPERM",
		"fcntl(F_SETOWN, other)":       "EPERM",
		"mount":                        "EPERM",
		"kcmp(self, other)":            "EPERM",
	}
	allowed := map[string]string{
		"seccomp mode of every thread": "ok",
		"no_new_privs of every thread": "ok",
		"kill(self, 0)":                "ok",
		"kill(self, SIGUSR1) received": "ok",
		"tgkill(self, own thread, 0)":  "ok",
		"sched_setaffinity(0)":         "ok",
		"fcntl(F_GETFL)":               "ok",
		"read /proc/1/status":          "ok",
		"pidfd_open(other)":            "ok",
	}
	t.Run("filter", func(t *testing.T) {
		want := merge(refused, allowed)
		if diff := cmp.Diff(want, runProbes(t, "filter")); diff != "" {
			t.Errorf("calls under the filter (-want +got):\n%s", diff)
		}
	})
	t.Run("filter keeping kcmp", func(t *testing.T) {
		got := runProbes(t, "filter+kcmp")
		if got["kcmp(self, other)"] != "ok" || got["ptrace(PTRACE_ATTACH, other)"] != "EPERM" {
			t.Errorf("with AllowKcmp: kcmp %s, ptrace %s; want ok, EPERM", got["kcmp(self, other)"], got["ptrace(PTRACE_ATTACH, other)"])
		}
	})
	// Without the filter none of the refused calls fails with EPERM: the refusals above
	// are the filter's, not a lack of privilege.
	t.Run("no filter", func(t *testing.T) {
		got := runProbes(t, "none")
		for name := range refused {
			if got[name] == "EPERM" {
				t.Errorf("%s fails with EPERM without the filter too", name)
			}
		}
		if got["seccomp mode of every thread"] == "ok" {
			t.Error("the child shows seccomp mode 2 without the filter")
		}
	})
}

func merge(a, b map[string]string) map[string]string {
	m := map[string]string{}
	for k, v := range a {
		m[k] = v
	}
	for k, v := range b {
		m[k] = v
	}
	return m
}

// runProbes starts a sleeping target and a child in mode, and returns what the child's
// calls returned.
func runProbes(t *testing.T, mode string) map[string]string {
	t.Helper()
	sleeper := exec.Command("sleep", "60")
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { sleeper.Process.Kill(); sleeper.Wait() }()
	child := exec.Command(os.Args[0], "-test.run=^$")
	child.Env = append(os.Environ(), childEnv+"="+mode, targetEnv+"="+strconv.Itoa(sleeper.Process.Pid))
	var stderr strings.Builder
	child.Stderr = &stderr
	out, err := child.Output()
	if err != nil {
		t.Fatalf("child %s: %v\n%s", mode, err, stderr.String())
	}
	got := map[string]string{}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("child %s: %v\n%s", mode, err, out)
	}
	return got
}

// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build amd64 || arm64

package sandbox

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Install confines every thread of the process, for good: first with opts.Landlock where
// the kernel offers Landlock, then with the seccomp filter. It checks from inside that
// each refuses what it should. An error before either is in place leaves the process as
// it was; any other error means the process is confined, but not as it should be, and
// the caller should stop.
func Install(opts Options) (Status, error) {
	var st Status
	if opts.Landlock != nil {
		var err error
		if st.Landlock, err = applyLandlock(*opts.Landlock); err != nil {
			return st, err
		}
	} else {
		st.Landlock = LandlockStatus{ABI: LandlockABI(), Reason: "no ruleset asked for"}
	}
	var err error
	st.Seccomp, err = installSeccomp(opts)
	return st, err
}

// installSeccomp installs the filter and checks it.
func installSeccomp(opts Options) (SeccompStatus, error) {
	pid := os.Getpid()
	rs := rules(opts)
	prog, err := assemble(rs, uint32(pid))
	if err != nil {
		return SeccompStatus{}, err
	}
	if err := load(prog); err != nil {
		return SeccompStatus{}, err
	}
	rep := SeccompStatus{Arch: archName, PID: pid, Instructions: len(prog)}
	for _, r := range rs {
		if r.kind == deny {
			rep.Denied = append(rep.Denied, r.name)
		} else {
			rep.Restricted = append(rep.Restricted, r.name)
		}
	}
	rep.Checked, err = check(pid)
	return rep, err
}

// load sets no_new_privs and installs prog with SECCOMP_FILTER_FLAG_TSYNC, so the Go
// runtime's existing threads get it too (new threads inherit it). Both happen on one
// locked OS thread: the kernel requires no_new_privs (or CAP_SYS_ADMIN) of the very thread
// that installs, and TSYNC then sets it on the others.
func load(prog []unix.SockFilter) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("sandbox: setting no_new_privs: %w", err)
	}
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	r, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, unix.SECCOMP_FILTER_FLAG_TSYNC, uintptr(unsafe.Pointer(&fprog)))
	runtime.KeepAlive(prog)
	if errno != 0 {
		return fmt.Errorf("sandbox: installing the seccomp filter: %w", errno)
	}
	if r != 0 {
		// TSYNC names a thread whose filters differ from ours: nothing was installed.
		return fmt.Errorf("sandbox: installing the seccomp filter: thread %d cannot take it", r)
	}
	return nil
}

// absentPID is above PID_MAX_LIMIT (4Mi): no task has it, so a probe naming it would
// change nothing even if the filter let it through.
const absentPID = 1 << 30

// check makes calls the filter must refuse, each harmless if it did not (they name no
// task, or an invalid descriptor), and calls it must let through.
func check(self int) ([]string, error) {
	probes := []struct {
		name string
		call func() error
	}{
		{"ptrace(PTRACE_ATTACH)", func() error { return unix.PtraceAttach(absentPID) }},
		{"process_vm_writev", func() error { _, err := unix.ProcessVMWritev(absentPID, nil, nil, 0); return err }},
		{"pidfd_getfd", func() error { _, err := unix.PidfdGetfd(-1, 0, 0); return err }},
		{"kill(other)", func() error { return unix.Kill(absentPID, 0) }},
		{"tgkill(other)", func() error { return unix.Tgkill(absentPID, absentPID, 0) }},
		{"execve", func() error { return unix.Exec("/nonexistent/numapref-sandbox-check", nil, nil) }},
		{"socket(AF_NETLINK, NETLINK_ROUTE)", func() error {
			fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE)
			if err == nil {
				unix.Close(fd)
			}
			return err
		}},
	}
	var checked []string
	for _, p := range probes {
		if err := p.call(); !errors.Is(err, unix.EPERM) {
			return checked, fmt.Errorf("sandbox: the filter is installed but %s returned %v, not EPERM", p.name, err)
		}
		checked = append(checked, p.name)
	}
	if err := unix.Kill(self, 0); err != nil {
		return checked, fmt.Errorf("sandbox: the filter is installed but refuses kill(self, 0): %w", err)
	}
	if err := unix.Tgkill(self, unix.Gettid(), 0); err != nil {
		return checked, fmt.Errorf("sandbox: the filter is installed but refuses tgkill(self, own thread, 0): %w", err)
	}
	return checked, nil
}

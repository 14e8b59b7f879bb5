// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

// Package rawfork forks the calling process the way C's fork() does: clone(SIGCHLD),
// without CLONE_VM, which Go's own os/exec never does. The kernel resets a task's forced
// preferred node in such a child, so test workloads use it to make the tasks the agent
// must catch.
package rawfork

import "syscall"

// Fork forks the process. The child is a copy with one thread that runs only raw system
// calls (nosplit, no allocation, no scheduler): it asks for SIGKILL when the parent's
// forking thread dies and then sleeps until killed. Callers that want the child to live
// as long as the process lock the forking goroutine to its thread for good.
//
//go:nosplit
//go:norace
func Fork() (int, syscall.Errno) {
	pid, _, errno := syscall.RawSyscall6(syscall.SYS_CLONE, uintptr(syscall.SIGCHLD), 0, 0, 0, 0, 0)
	if errno != 0 {
		return 0, errno
	}
	if pid == 0 {
		_, _, _ = syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_SET_PDEATHSIG, uintptr(syscall.SIGKILL), 0)
		for {
			_, _, _ = syscall.RawSyscall6(syscall.SYS_PPOLL, 0, 0, 0, 0, 0, 0) // no fds, no timeout: sleeps until killed
		}
	}
	return int(pid), 0
}

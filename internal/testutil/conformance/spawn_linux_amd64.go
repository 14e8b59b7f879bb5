// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build linux && amd64

package conformance

import (
	"fmt"
	"runtime"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// heldSpawn says spawnHeld works on this architecture.
const heldSpawn = true

func rawSpawn(flags, stack uintptr, holdFD int, path *byte, argv, envv **byte) (pid int, errno uintptr)

// heldChild is a child process created by clone() that waits, before it execs, until
// released. Until then a CLONE_VM child still shares its parent's memory.
type heldChild struct {
	pid     int
	release func() error
	wait    func() (unix.WaitStatus, error)
}

// spawnHeld creates a child with clone(): with vm, clone(CLONE_VM) as vfork and
// posix_spawn do (the patch keeps the preferred node); without, a plain fork() (the patch
// resets it). The child execs path once released.
func spawnHeld(vm bool, path string, argv, env []string) (*heldChild, error) { //nolint:funlen // test tooling: the pointers the child reads stay alive, and are freed, in the closures that release and reap it
	pathp, err := syscall.BytePtrFromString(path)
	if err != nil {
		return nil, err
	}
	argvp, err := syscall.SlicePtrFromStrings(argv)
	if err != nil {
		return nil, err
	}
	envp, err := syscall.SlicePtrFromStrings(env)
	if err != nil {
		return nil, err
	}
	var hold [2]int
	if err := unix.Pipe2(hold[:], unix.O_CLOEXEC); err != nil {
		return nil, err
	}
	flags := uintptr(unix.SIGCHLD)
	var stack []byte
	var sp uintptr
	if vm {
		flags |= unix.CLONE_VM
		if stack, err = unix.Mmap(-1, 0, 64<<10, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_STACK); err != nil {
			unix.Close(hold[0])
			unix.Close(hold[1])
			return nil, err
		}
		sp = uintptr(unsafe.Pointer(&stack[len(stack)-64]))
	}
	// No descriptor without close-on-exec may be created while the child is made.
	syscall.ForkLock.Lock()
	pid, errno := rawSpawn(flags, sp, hold[0], pathp, &argvp[0], &envp[0])
	syscall.ForkLock.Unlock()
	unix.Close(hold[0])
	if errno != 0 {
		unix.Close(hold[1])
		if stack != nil {
			_ = unix.Munmap(stack)
		}
		return nil, fmt.Errorf("clone: %w", syscall.Errno(errno))
	}
	released := false
	c := &heldChild{pid: pid}
	c.release = func() error {
		if released {
			return nil
		}
		released = true
		_, err := unix.Write(hold[1], []byte{1})
		unix.Close(hold[1])
		return err
	}
	c.wait = func() (unix.WaitStatus, error) {
		_ = c.release()
		var ws unix.WaitStatus
		for {
			_, err := unix.Wait4(pid, &ws, 0, nil)
			if err == unix.EINTR {
				continue
			}
			// The child no longer runs in (or reads) this process's memory.
			runtime.KeepAlive(pathp)
			runtime.KeepAlive(argvp)
			runtime.KeepAlive(envp)
			if stack != nil {
				_ = unix.Munmap(stack)
			}
			return ws, err
		}
	}
	return c, nil
}

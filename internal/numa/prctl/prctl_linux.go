// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build linux

package prctl

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

func rawPrctl(option int, cmd, pid, nid uintptr, addr unsafe.Pointer) error {
	_, _, errno := unix.Syscall6(unix.SYS_PRCTL, uintptr(option), cmd, pid, nid, uintptr(addr), 0)
	if errno != 0 {
		return errno
	}
	return nil
}

// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build linux

package sandbox

import "golang.org/x/sys/unix"

const (
	auditArch = unix.AUDIT_ARCH_X86_64
	archName  = "x86_64"
	// x32Bit marks a call of the x32 ABI, which shares the x86_64 audit arch but numbers
	// its calls from here: without a check, ptrace would pass the filter as x32 ptrace.
	x32Bit = 0x40000000
)

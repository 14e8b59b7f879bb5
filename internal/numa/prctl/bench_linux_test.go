// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build linux

package prctl

import (
	"testing"

	"golang.org/x/sys/unix"
)

func BenchmarkPrctlSyscallFloor(b *testing.B) {
	for b.Loop() {
		if _, err := unix.PrctlRetInt(unix.PR_GET_DUMPABLE, 0, 0, 0, 0); err != nil {
			b.Fatal(err)
		}
	}
}

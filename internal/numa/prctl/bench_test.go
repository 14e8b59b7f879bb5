// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package prctl

import (
	"testing"
	"unsafe"
)

// Benchmarks of GET and SET per backend, on the calling thread (the emulator's are in its
// package):
//
//	go test -run '^$' -bench . -benchtime 2s ./internal/numa/...
//
// The prctl backend cannot reach the kernel here (no patch), so its figures measure the
// backend's own cost with the system call faked; PrctlSyscallFloor is one real, trivial
// prctl (PR_GET_DUMPABLE) for the kernel-entry part.

func BenchmarkPrctl(b *testing.B) {
	// The kernel's part, faked: GET stores -1.
	fake := func(option int, cmd, pid, nid uintptr, addr unsafe.Pointer) error {
		if cmd == CmdGet {
			*(*int32)(addr) = -1
		}
		return nil
	}
	p, support := newPrctl(DefaultOption, "../testdata/proc/patched", fake)
	if !support.Supported {
		b.Fatal(support.Reason)
	}
	b.Run("GetFakeSyscall", func(b *testing.B) {
		for b.Loop() {
			if _, err := p.Get(0); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("SetFakeSyscall", func(b *testing.B) {
		for b.Loop() {
			if err := p.Set(0, 0); err != nil {
				b.Fatal(err)
			}
		}
	})
	unsupported, _ := newPrctl(DefaultOption, "../testdata/proc/unpatched", fake)
	b.Run("GetUnsupported", func(b *testing.B) {
		for b.Loop() {
			_, _ = unsupported.Get(0)
		}
	})
}

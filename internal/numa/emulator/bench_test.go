// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package emulator

import (
	"os"
	"runtime"
	"testing"
)

// BenchmarkEmulator measures GET and SET on the calling thread, with the emulator's state
// on the test's temporary directory and, when there is one, on tmpfs (/dev/shm): replacing
// a file by rename makes ext4 flush it (auto_da_alloc), which dominates SET on disk.
//
//	go test -run '^$' -bench . -benchtime 2s ./internal/numa/emulator
func BenchmarkEmulator(b *testing.B) {
	dirs := map[string]string{"disk": b.TempDir()}
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		shm, err := os.MkdirTemp("/dev/shm", "numapref-bench-")
		if err == nil {
			defer os.RemoveAll(shm)
			dirs["tmpfs"] = shm
		}
	}
	for _, where := range []string{"disk", "tmpfs"} {
		if dirs[where] != "" {
			b.Run(where, func(b *testing.B) { benchmarkEmulator(b, dirs[where]) })
		}
	}
}

func benchmarkEmulator(b *testing.B, dir string) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	e, err := New(Options{StateDir: dir})
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	b.Run("GetDefault", func(b *testing.B) {
		for b.Loop() {
			if _, err := e.Get(0); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Set", func(b *testing.B) {
		for b.Loop() {
			if err := e.Set(0, 0); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("GetAfterSet", func(b *testing.B) {
		for b.Loop() {
			if _, err := e.Get(0); err != nil {
				b.Fatal(err)
			}
		}
	})
	if err := e.Set(0, -1); err != nil {
		b.Fatal(err)
	}
}

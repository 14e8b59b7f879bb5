// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build linux

package numa

import (
	"testing"

	"golang.org/x/sys/unix"
)

// MonotonicNs, which makes no system call, reads what clock_gettime(CLOCK_MONOTONIC) does:
// each reading falls between two of the system call's, within a few µs.
func TestMonotonicNsIsTheKernelsClock(t *testing.T) {
	sys := func() int64 {
		var ts unix.Timespec
		if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
			t.Fatal(err)
		}
		return ts.Nano()
	}
	const slack = 50_000 // ns: the pairing's own reading, and a preemption or two
	for range 1000 {
		before := sys()
		got, ok := MonotonicNs()
		after := sys()
		if !ok {
			t.Fatal("MonotonicNs: unreadable")
		}
		if int64(got) < before-slack || int64(got) > after+slack {
			t.Fatalf("MonotonicNs = %d, not within %d ns of [%d, %d]", got, slack, before, after)
		}
	}
}

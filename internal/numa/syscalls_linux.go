// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build linux

package numa

import (
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// errESRCH is what reading /proc/<pid>/... returns when the task exits mid-read.
var errESRCH error = unix.ESRCH

// errEPERM and errEACCES are the kernel's refusals for lack of a right.
var errEPERM, errEACCES error = unix.EPERM, unix.EACCES

// OpenFilesLimit is the soft limit of open files of this process (RLIMIT_NOFILE).
func OpenFilesLimit() (uint64, error) {
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		return 0, err
	}
	return lim.Cur, nil
}

// MonotonicNs reads CLOCK_MONOTONIC (ktime_get_ns), the clock the proc connector stamps
// its events with; false when it cannot be read.
// It makes no system call: it adds the Go runtime's monotonic time since one paired
// reading (monoBase), and the runtime reads CLOCK_MONOTONIC through the vDSO. The fork
// path reads it at every event and every SET.
func MonotonicNs() (uint64, bool) {
	base := monoBase()
	if !base.ok {
		return 0, false
	}
	return uint64(base.ns + int64(time.Since(base.at))), true
}

// monoPair is one reading of CLOCK_MONOTONIC, ns, and of the Go clock at the same moment.
type monoPair struct {
	at time.Time
	ns int64
	ok bool
}

// monoBase reads CLOCK_MONOTONIC through the system call between two readings of the Go
// clock, and takes their midpoint for its moment; a pair more than 20 µs apart (the
// thread preempted between them) is read again, a few times.
var monoBase = sync.OnceValue(func() monoPair {
	best := monoPair{}
	var bestGap time.Duration
	for range 5 {
		before := time.Now()
		var ts unix.Timespec
		if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
			return monoPair{}
		}
		gap := time.Since(before)
		if !best.ok || gap < bestGap {
			best, bestGap = monoPair{at: before.Add(gap / 2), ns: ts.Nano(), ok: true}, gap
		}
		if gap < 20*time.Microsecond {
			break
		}
	}
	return best
})

// BoottimeNs reads CLOCK_BOOTTIME in ns: the clock of the start times in /proc/<pid>/stat
// (TicksPerSecond), which counts on while the host is suspended; false when it cannot be
// read.
func BoottimeNs() (uint64, bool) {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts); err != nil {
		return 0, false
	}
	return uint64(ts.Nano()), true
}

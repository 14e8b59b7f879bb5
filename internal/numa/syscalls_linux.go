// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build linux

package numa

import "golang.org/x/sys/unix"

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
func MonotonicNs() (uint64, bool) {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		return 0, false
	}
	return uint64(ts.Nano()), true
}

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

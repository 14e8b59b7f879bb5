// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build !linux

package numa

import "errors"

// errNotLinux is what the system calls return on other systems.
var errNotLinux = errors.New("not supported on this operating system")

var (
	errESRCH  = errors.New("no such process")
	errEPERM  = errors.New("operation not permitted")
	errEACCES = errors.New("permission denied")
)

// OpenFilesLimit is the soft limit of open files: unknown off Linux.
func OpenFilesLimit() (uint64, error) { return 0, errors.New("no RLIMIT_NOFILE on this system") }

// MonotonicNs reads CLOCK_MONOTONIC: unavailable off Linux.
func MonotonicNs() (uint64, bool) { return 0, false }

// BoottimeNs reads CLOCK_BOOTTIME: unavailable off Linux.
func BoottimeNs() (uint64, bool) { return 0, false }

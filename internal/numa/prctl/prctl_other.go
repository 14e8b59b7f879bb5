// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build !linux

package prctl

import (
	"errors"
	"unsafe"
)

// errNotLinux is what the system calls return on other systems.
var errNotLinux = errors.New("not supported on this operating system")

func rawPrctl(int, uintptr, uintptr, uintptr, unsafe.Pointer) error { return errNotLinux }

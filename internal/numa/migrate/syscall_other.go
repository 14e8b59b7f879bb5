// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build !linux

package migrate

import (
	"errors"

	"github.com/numapref/numapref/internal/numa"
)

// errNotLinux is what the system calls give on other systems.
var errNotLinux = errors.New("page migration: not supported on this operating system")

// Pages moves nothing on other systems.
func Pages(pid int, from, to numa.NodeMask) (int, error) {
	return 0, &Error{Op: "migrate_pages", Pid: pid, Errno: errNotLinux, Kind: ErrUnsupported}
}

// Permitted permits nothing on other systems.
func Permitted(pid int) error {
	return &Error{Op: "move_pages", Pid: pid, Errno: errNotLinux, Kind: ErrUnsupported}
}

// Move moves nothing on other systems.
func (m *Mover) Move(pid int, from numa.NodeMask, to int, cursor uint64, budget int) (Step, error) {
	return Step{}, &Error{Op: "move_pages", Pid: pid, Errno: errNotLinux, Kind: ErrUnsupported}
}

// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build linux && !amd64

package conformance

import (
	"errors"

	"golang.org/x/sys/unix"
)

// heldSpawn says spawnHeld works on this architecture.
const heldSpawn = false

type heldChild struct {
	pid     int
	release func() error
	wait    func() (unix.WaitStatus, error)
}

// spawnHeld needs a few lines of assembly that exist for amd64 only.
func spawnHeld(bool, string, []string, []string) (*heldChild, error) {
	return nil, errors.ErrUnsupported
}

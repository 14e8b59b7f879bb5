// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build !linux

package numa

import "fmt"

// OpenPIDFD has no pidfd to give on other systems.
func OpenPIDFD(tid, tgid int) (*PIDFD, error) {
	return nil, fmt.Errorf("opening a pidfd for task %d: %w: %w", tid, ErrNoPIDFD, errNotLinux)
}

// Alive is never reached: OpenPIDFD opens none.
func (p *PIDFD) Alive() (bool, error) { return false, errNotLinux }

// Close does nothing.
func (p *PIDFD) Close() error { return nil }

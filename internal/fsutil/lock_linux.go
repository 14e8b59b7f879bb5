// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build linux

package fsutil

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// noFollow keeps a lock file's open from following a symbolic link in its place.
const noFollow = unix.O_NOFOLLOW

// tryFlock takes an exclusive flock on f without waiting; ErrLocked if another holds it.
func tryFlock(f *os.File) error {
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case errors.Is(err, unix.EWOULDBLOCK):
			return ErrLocked
		}
		return err
	}
}

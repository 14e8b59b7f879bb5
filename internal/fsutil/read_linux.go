// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build linux

package fsutil

import (
	"io/fs"
	"slices"

	"golang.org/x/sys/unix"
)

// The readers here call the kernel directly: one open, reads until end of file, one close.
// An os.File also registers with the poller, checks its flags and sets a finalizer, which
// for a small /proc, cgroup or state file costs more than the read itself. Errors are
// *fs.PathError, as os would return.

// minReadBuf is the capacity a read starts with when it has no (large enough) buffer.
const minReadBuf = 2048

// ReadFileInto returns the whole contents of path, read through one open file (so the
// kernel's iterator gives one consistent view of a /proc or cgroup list). If buf is not
// nil, *buf is reused as the read buffer, grown as needed, and left holding the bytes
// read; the result then aliases *buf. With a nil buf every call returns a new slice.
func ReadFileInto(path string, buf *[]byte) ([]byte, error) {
	return ReadFileStat(path, buf, nil)
}

// ReadFileStat is ReadFileInto that also fills st, if it is not nil, from the open file
// before reading it.
func ReadFileStat(path string, buf *[]byte, st *unix.Stat_t) ([]byte, error) {
	fd, err := OpenRetry(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	defer unix.Close(fd)
	if st != nil {
		if err := unix.Fstat(fd, st); err != nil {
			return nil, &fs.PathError{Op: "stat", Path: path, Err: err}
		}
	}
	var b []byte
	if buf != nil {
		b = (*buf)[:0]
	}
	if cap(b) < minReadBuf {
		b = make([]byte, 0, minReadBuf)
	}
	for {
		if len(b) == cap(b) {
			b = slices.Grow(b, cap(b))
		}
		n, err := unix.Read(fd, b[len(b):cap(b)])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			if buf != nil {
				*buf = b
			}
			return nil, &fs.PathError{Op: "read", Path: path, Err: err}
		}
		if n == 0 {
			break
		}
		b = b[:len(b)+n]
	}
	if buf != nil {
		*buf = b
	}
	return b, nil
}

// OpenRetry is unix.Open, retried while it is interrupted by a signal.
func OpenRetry(path string, flags int, mode uint32) (int, error) {
	for {
		fd, err := unix.Open(path, flags, mode)
		if err != unix.EINTR {
			return fd, err
		}
	}
}

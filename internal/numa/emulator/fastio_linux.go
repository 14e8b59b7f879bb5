// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build linux

package emulator

import (
	"io/fs"

	"golang.org/x/sys/unix"

	"github.com/numapref/numapref/internal/fsutil"
)

// writeNewFile creates path (which must not exist) with data and mode, past the umask. The
// emulator writes a file per SET, so this uses plain system calls, as fsutil.ReadFileInto
// does for its reads: an os.File also registers with the poller and checks its flags, which
// costs more than the write itself. Errors are *fs.PathError, as os would return.
func writeNewFile(path string, data []byte, mode uint32) error {
	fd, err := fsutil.OpenRetry(path, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_CLOEXEC, mode)
	if err != nil {
		return &fs.PathError{Op: "open", Path: path, Err: err}
	}
	for len(data) > 0 && err == nil {
		var n int
		if n, err = unix.Write(fd, data); err == nil {
			data = data[n:]
		} else if err == unix.EINTR {
			err = nil
		}
	}
	if err == nil {
		err = unix.Fchmod(fd, mode)
	}
	if closeErr := unix.Close(fd); err == nil {
		err = closeErr
	}
	if err != nil {
		_ = unix.Unlink(path) // the write error is the one to return
		return &fs.PathError{Op: "write", Path: path, Err: err}
	}
	return nil
}

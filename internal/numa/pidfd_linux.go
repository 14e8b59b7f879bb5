// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build linux

package numa

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// pidfdThread is PIDFD_THREAD (Linux 6.9): a pidfd for a thread, not only for a process's
// leader. The uapi defines it as O_EXCL.
const pidfdThread = unix.O_EXCL

// OpenPIDFD opens a pidfd for task tid of process tgid (0 if unknown): with PIDFD_THREAD
// where the kernel has it (6.9), else, for a process's leader (tid == tgid), a process
// pidfd (5.3). A task that does not exist yields an error wrapping ErrTaskGone; a task for
// which the kernel gives no pidfd, one wrapping ErrNoPIDFD.
func OpenPIDFD(tid, tgid int) (*PIDFD, error) {
	fd, err := unix.PidfdOpen(tid, pidfdThread)
	if err == unix.EINVAL && tid == tgid {
		fd, err = unix.PidfdOpen(tid, 0) // a kernel without PIDFD_THREAD
	}
	switch {
	case err == nil:
		return &PIDFD{fd: fd}, nil
	case err == unix.ESRCH:
		return nil, fmt.Errorf("opening a pidfd for task %d: %w", tid, ErrTaskGone)
	case errors.Is(err, unix.EINVAL), errors.Is(err, unix.ENOSYS), errors.Is(err, unix.EPERM),
		errors.Is(err, unix.EMFILE), errors.Is(err, unix.ENFILE):
		return nil, fmt.Errorf("opening a pidfd for task %d: %w: %w", tid, ErrNoPIDFD, err)
	default:
		return nil, fmt.Errorf("opening a pidfd for task %d: %w", tid, err)
	}
}

// Alive reports whether the task is still running and so still holds its id. It polls the
// pidfd without waiting: the kernel marks it readable once the task (a thread pidfd) or
// its whole process (a process pidfd) has exited, and hung up once the id is released.
// Either counts as gone: an exited task can no longer be the one identified.
func (p *PIDFD) Alive() (bool, error) {
	fds := []unix.PollFd{{Fd: int32(p.fd), Events: unix.POLLIN}}
	for {
		n, err := unix.Poll(fds, 0)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return false, fmt.Errorf("polling pidfd: %w", err)
		}
		return n == 0 || fds[0].Revents&(unix.POLLIN|unix.POLLHUP|unix.POLLERR|unix.POLLNVAL) == 0, nil
	}
}

// Close releases the pidfd.
func (p *PIDFD) Close() error { return unix.Close(p.fd) }

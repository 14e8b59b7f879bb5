// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package numa

import "errors"

// ErrNoPIDFD means the kernel gives no pidfd for the task: pidfd_open is missing (before
// Linux 5.3) or refused (a seccomp profile), the task is a thread other than its
// process's leader on a kernel without PIDFD_THREAD (before 6.9), or the process is out of
// file descriptors. The caller falls back to the task's start time.
var ErrNoPIDFD = errors.New("no pidfd for this task")

// A PIDFD is a pidfd(2): a handle on one task that, unlike the task's id, never comes to
// name another task. While Alive reports true, the task's id names the task the PIDFD was
// opened for; once the task is gone its id may be given to a new task, and Alive reports
// false for ever. It costs one file descriptor until Close.
type PIDFD struct{ fd int }

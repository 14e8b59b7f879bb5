// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

// Package migrate moves a running process's pages between NUMA nodes, and counts where
// they are.
//
// Two kernel calls move pages of another process; both need ptrace read access to it
// (ptrace_may_access with PTRACE_MODE_READ_REALCREDS: the same user, or CAP_SYS_PTRACE):
//   - Pages is migrate_pages(2): every page of the process on the from nodes, in one call.
//     The kernel isolates them all before it copies any, holding the process's mmap lock
//     while it gathers them. With CAP_SYS_NICE the caller moves pages other processes map
//     too (MPOL_MF_MOVE_ALL: shared libraries' page cache) and may move them outside the
//     process's cpuset.mems.
//   - Mover.Move is move_pages(2) over a bounded run of addresses: a step of a large
//     process's move, so that a rate can spread it over time. It moves only pages this
//     process alone maps (MPOL_MF_MOVE), so it needs no CAP_SYS_NICE, and the kernel
//     refuses a target node outside the process's cpuset.mems.
//
// NodePages counts a process's pages per node from /proc/<pid>/numa_maps.
package migrate

import (
	"errors"
	"fmt"
	"strings"

	"github.com/numapref/numapref/internal/numa"
)

// The kinds of refusal, for errors.Is. Each error of this package that comes from the
// kernel also wraps its errno, so numa.IsTaskGone and numa.IsPermissionDenied read it too.
var (
	// ErrGone: the process is gone (ESRCH).
	ErrGone = errors.New("process gone")
	// ErrPermission: the caller may not move this process's pages (EPERM): it lacks ptrace
	// read access (another user's process, or one that is not dumpable, without
	// CAP_SYS_PTRACE), or, for Pages, CAP_SYS_NICE for nodes outside its cpuset.
	ErrPermission = errors.New("permission denied")
	// ErrPinned: the target node is outside the process's cpuset.mems. A cpuset pin is
	// never moved against.
	ErrPinned = errors.New("target node outside the process's cpuset.mems")
	// ErrInvalid: the kernel refused the request (EINVAL): no usable target node, or a
	// process without memory (exiting, or a kernel thread).
	ErrInvalid = errors.New("invalid request")
	// ErrNoNode: the target node has no memory or is offline (ENODEV).
	ErrNoNode = errors.New("target node has no memory")
	// ErrUnsupported: the kernel has no page migration (ENOSYS: no CONFIG_MIGRATION).
	ErrUnsupported = errors.New("page migration not supported")
)

// Error is a kernel refusal of a call on process Pid.
type Error struct {
	Op    string // the system call
	Pid   int
	Errno error // the errno the kernel returned
	Kind  error // one of the Err values above, or nil for another errno
}

func (e *Error) Error() string {
	if e.Kind != nil {
		return fmt.Sprintf("%s of process %d: %v (%v)", e.Op, e.Pid, e.Kind, e.Errno)
	}
	return fmt.Sprintf("%s of process %d: %v", e.Op, e.Pid, e.Errno)
}

// Unwrap gives the kind and the errno, so errors.Is matches either; but a pinned target's
// EACCES is not unwrapped, so that numa.IsPermissionDenied does not take a cpuset pin for
// a missing right.
func (e *Error) Unwrap() []error {
	switch e.Kind {
	case nil:
		return []error{e.Errno}
	case ErrPinned:
		return []error{e.Kind}
	}
	return []error{e.Kind, e.Errno}
}

// NodePages counts the pages of process pid on each node, from procRoot/<pid>/numa_maps,
// in pages of pageSize bytes (a huge page counts as the base pages it holds). A process
// that is gone gives an error wrapping numa.ErrTaskGone. The kernel walks every page of
// the process to print numa_maps: this costs about as much as the process is large.
func NodePages(procRoot string, pid int, pageSize uint64) (map[int]uint64, error) {
	data, err := numa.ReadTaskFile(procRoot, pid, "numa_maps")
	if err != nil {
		return nil, err
	}
	bytes := map[int]uint64{}
	if err := numa.AddNumaMaps(bytes, string(data), pageSize); err != nil {
		return nil, fmt.Errorf("counting the pages of process %d: %w", pid, err)
	}
	pages := make(map[int]uint64, len(bytes))
	for node, b := range bytes {
		pages[node] = b / pageSize
	}
	return pages, nil
}

// MemsAllowed reads the nodes process pid may allocate on (its cpuset.mems), from the
// Mems_allowed line of procRoot/<pid>/status.
func MemsAllowed(procRoot string, pid int) (numa.NodeMask, error) {
	data, err := numa.ReadTaskFile(procRoot, pid, "status")
	if err != nil {
		return numa.NodeMask{}, err
	}
	for line := range strings.Lines(string(data)) {
		if v, ok := strings.CutPrefix(line, "Mems_allowed:"); ok {
			m, err := numa.ParseNodeMask(v)
			if err != nil {
				return numa.NodeMask{}, fmt.Errorf("process %d: %w", pid, err)
			}
			return m, nil
		}
	}
	return numa.NodeMask{}, fmt.Errorf("process %d: no Mems_allowed line in its status", pid)
}

// Step is what one Mover.Move did, in pages of the system's page size.
type Step struct {
	Found   int    // pages found on the from nodes
	Moved   int    // of those, pages now on the target node
	Failed  int    // pages still on a from node that the kernel did not move: the target is full (ENOMEM), the page was busy
	Shared  int    // pages left where they were because other processes map them too
	Scanned int    // addresses looked at
	Next    uint64 // the address the next step starts at
	Done    bool   // the step reached the end of the address space
}

// Add adds o's counts to s.
func (s *Step) Add(o Step) {
	s.Found += o.Found
	s.Moved += o.Moved
	s.Failed += o.Failed
	s.Shared += o.Shared
	s.Scanned += o.Scanned
}

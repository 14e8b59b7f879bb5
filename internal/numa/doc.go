// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

// Package numa is numapref's read-only view of the kernel: the NUMA topology from sysfs,
// node lists and masks, the kernel's NUMA balancing state and the NUMA lines of
// /proc/<pid>/sched, the proc connector's process events, tasks and their identity
// (pidfds), and where memory lies per node (a cgroup's memory.numa_stat, a process's
// numa_maps). Every reader takes its root (/proc, /sys, debugfs) or path explicitly, so
// tests run against fixture trees under testdata/.
//
// Nothing here can set a task's forced preferred node or write a sysctl: a package that
// imports only numa can only read the kernel. Of the forced node (the proposed prctl
// PR_PREFERRED_NID) it holds what reading needs: PreferredNodeReader (Get only), NoNode,
// and Support, which says whether a backend can be used. What sets the node is in package
// prctl (the prctl's backends and Probe) and, for kernels without the patch, in package
// emulator; what writes the balancing sysctls is in package tune. Those build on this
// package's readers; nothing here imports them.
//
// Callers tell a task that is gone with IsTaskGone (ESRCH from a backend, ErrTaskGone from
// a /proc read or pidfd_open): one spelling of it. ReadOnline reads the part of the
// topology that changes while the host runs (node and CPU hotplug); OpenFilesLimit and
// MonotonicNs are the process facts the node agent needs of the kernel.
//
// ProcConn reads the proc connector; ForkFilter (procfilter.go) is the classic BPF socket
// filter with which the kernel drops, before the agent wakes, every event but the forks of
// processes the agent can act on.
package numa

// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

// Package sandbox confines the running process with a seccomp filter of its own (a
// denylist of what the agent promises, in SECURITY.md, that it never does) and, where the
// kernel offers Landlock and the caller asks for it, a Landlock ruleset of the paths and
// ports it needs (landlock_linux.go). Both are installed once start-up has opened what it
// needs (the kernel backend, the proc connector, the state directory), on every thread,
// and cannot be removed; Status says what is in place.
//
// The filter is classic BPF, assembled here without cgo or libseccomp (filter_linux.go).
// It is a denylist because the agent's own set of calls is large and moves with the Go
// runtime and its libraries (futexes, epoll, sockets, files, the pidfds and the prctl it is
// there for); what it denies is small and fixed:
//
//   - another task's memory or registers: ptrace (every request), process_vm_readv and
//     process_vm_writev, pidfd_getfd, process_madvise, process_mrelease, get_robust_list,
//     perf_event_open, and kcmp unless the emulated kernel needs it (Options.AllowKcmp);
//   - signals to anyone but the agent itself: kill, tkill, tgkill, rt_sigqueueinfo and
//     rt_tgsigqueueinfo are allowed only when they name the agent's own process (the Go
//     runtime preempts its threads with tgkill(getpid(), tid, SIGURG)); pidfd_send_signal,
//     which names its target by a descriptor the filter cannot read, and fcntl F_SETOWN /
//     F_SETOWN_EX, ioctl FIOSETOWN / SIOCSPGRP (SIGIO to another process) are denied;
//   - another task's scheduling and limits: sched_setaffinity, sched_setscheduler,
//     sched_setparam, sched_setattr and prlimit64 only on the agent itself (pid 0 or its
//     own), setpriority, ioprio_set, migrate_pages and move_pages never;
//   - the kernel and the host: modules, kexec, reboot, swap, mounts, namespaces (setns,
//     unshare), bpf, keyrings, open_by_handle_at, userfaultfd and io_uring;
//   - new programs: execve and execveat;
//   - the host's network, which CAP_NET_ADMIN in the host network namespace would open:
//     socket(2) only for AF_INET and AF_INET6 streams and datagrams, AF_NETLINK with
//     NETLINK_CONNECTOR (the proc connector; not route, netfilter, xfrm or any other
//     netlink family), and AF_UNIX only with Options.AllowUnixSockets (the NRI plugin);
//     and no ioctl of sockets or network devices (0x89xx, 0x8bxx).
//
// A Landlock domain (Options.Landlock) refuses the files outside its rules, wherever the
// path leads (through /proc/<pid>/root too), other TCP ports, abstract unix sockets of
// other processes, and ptrace access to any process outside the domain: so the caller asks
// for it only when the process needs no such access (the preferred-node prctl checks it).
//
// Each denied call fails with EPERM. A call of another architecture's ABI (the i386 entry
// on x86_64, AArch32 on arm64) kills the process: the filter's numbers are the native
// ones, and the agent (pure Go) never makes one; x32 calls on x86_64 fail with EPERM.
package sandbox

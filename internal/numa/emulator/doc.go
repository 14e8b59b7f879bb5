// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

// Package emulator emulates the PR_PREFERRED_NID prctl for kernels without the patch.
// Emulator is a prctl.Kernel and a prctl.Raw, like prctl.Prctl, the real system call.
// It is built on package numa's readers of the real kernel (tasks, /proc/<pid>/sched, the
// proc connector); package conformance holds the cases both backends must pass.
//
// Its parts: the Emulator's calls, checked in the patch's order (emulator_linux.go) with
// the ptrace access model (ptrace.go); the store, the state directory described below
// (store_linux.go, entry.go); the listener, the one process that follows task creation
// through the proc connector and the task:task_newtask trace (listener_linux.go,
// clonetrace*.go); and an opt-in audit log of SETs (AuditTo).
//
// The Emulator reproduces the patch's semantics (error codes and their order,
// num_possible_nodes(), the ptrace check, inheritance) and keeps the "kernel state" in a
// state directory, so the state outlives the process using it, as the kernel's does.
//
// What it reproduces:
//   - ERANGE for cmd >= 2, checked first; then ESRCH for an unknown pid (pid 0 is the
//     calling thread; pid and nid are truncated to 32 bits as the kernel does); then EPERM
//     unless the caller passes ptrace_may_access(PTRACE_MODE_READ_REALCREDS), for GET and
//     SET alike (uids and gids, dumpability, and the capability module's rule that,
//     without CAP_SYS_PTRACE in the caller's effective set, the target's permitted
//     capabilities must be a subset of the caller's); then EINVAL for a misaligned GET
//     pointer, EFAULT for a NULL one, and EINVAL for a SET node outside
//     [-1, num_possible_nodes()).
//   - SET n sets both numa_preferred_nid_force and numa_preferred_nid; SET -1 clears both.
//   - A task is named by (tid, start time): a recycled pid is a new task and holds -1.
//   - A fork() child starts at -1; threads and CLONE_VM children inherit their creator's
//     values, and keep them across exec.
//
// Its limits, all in the direction of "assume a fresh task" (-1), never of a wrong
// inherited value, and each counted in Stats.AssumedFresh so the agent re-applies:
//   - It learns of new tasks only from the proc connector (Options.ForkEvents,
//     CAP_NET_ADMIN). A task born while no emulator listened, or while events were lost,
//     and whose value it is asked for after something was forced, is assumed fresh.
//   - The fork event carries no clone flags and, for a new thread, does not name the thread
//     that called clone(). The listener reads both from the task:task_newtask tracepoint in
//     a trace instance of its own (Options.TracefsRoot; Stats.CloneTrace),
//     matched to the fork event by pid and time; then a CLONE_VM child is known even if it
//     has exec'ed, and a thread inherits from its creator. Without tracefs (or when the
//     trace lost events around a birth) it falls back to guessing: a new process is known
//     to be a CLONE_VM child only if kcmp(KCMP_VM) finds it still sharing its parent's
//     memory when the event is handled, so a vfork/posix_spawn child that has already
//     exec'ed by then is assumed fresh (a fork() child that has not exec'ed is recognised
//     by its unchanged memory layout); and if a new thread's group's older threads hold
//     different values, the thread is assumed fresh.
//   - An exec by a non-leader thread of a group whose threads held different values makes
//     the leader assumed fresh.
//   - A value set between a fork and the handling of its event is what the child gets.
//   - The ptrace model ignores security modules and user namespaces, and cannot see that a
//     task whose effective uid is 0 is not dumpable (it treats it as dumpable).
//   - Automatic NUMA balancing is not modelled: numa_preferred_nid is the kernel's own
//     value until a SET, then the emulated one.
//
// State directory layout: lock (flock, one writer), meta.json, listener (the listening
// process's shared page), and a read-only view of each task the emulator knows, placed and
// shaped like the kernel's: proc/<tgid>/task/<tid>/sched, with the lines
// `numa_preferred_nid_force : N` and `numa_preferred_nid : N` (plus the task's start time
// and how the value came about). numa.ReadSchedNUMA(<StateDir>/proc/<tgid>/task, tid)
// reads it as it reads /proc; a task without a file holds -1 (or, if it started after
// something was forced, is decided on first use).
package emulator

// Package numa is numapref's view of the kernel: a task's forced preferred NUMA node
// (the proposed prctl PR_PREFERRED_NID), the NUMA topology from sysfs, the kernel's NUMA
// balancing state and the NUMA lines of /proc/<pid>/sched, the proc connector's process
// events, tasks and their identity, and where memory lies per node (a cgroup's
// memory.numa_stat, a process's numa_maps). Every reader takes its root (/proc, /sys,
// debugfs) or path explicitly, so tests run against fixture trees under testdata/.
//
// PreferredNode is what the node agent uses: Get and Set of one task's node. Raw is the
// prctl's arguments as such, for the conformance cases. Two backends implement both:
//   - Prctl, here: the real system call. It calls nothing until /proc/self/sched shows the
//     patch's numa_preferred_nid_force line: mainline took the option numbers near the
//     patch's (78 is PR_FUTEX_HASH on 6.16 and later, 79 PR_RSEQ_SLICE_EXTENSION on 7.0).
//   - emulator.Emulator, in the emulator subpackage: the patch's semantics over a state
//     directory, for kernels without it. It builds on this package's kernel readers
//     (ReadTask, ReadTaskFile, ReadSchedNUMA, ProcConn); nothing here imports it.
//
// The cases both backends must pass live in internal/testutil/conformance.
//
// Callers tell a task that is gone with IsTaskGone (ESRCH from a backend, ErrTaskGone from
// a /proc read or pidfd_open): one spelling of it. ReadOnline reads the part of the
// topology that changes while the host runs (node and CPU hotplug); OpenFilesLimit and
// MonotonicNs are the process facts the node agent needs of the kernel.
//
// ProcConn reads the proc connector; ForkFilter (procfilter.go) is the classic BPF socket
// filter with which the kernel drops, before the agent wakes, every event but the forks of
// processes the agent can act on.
//
// Probe gathers the node's kernel facts into a Report for the `probe` command.
package numa

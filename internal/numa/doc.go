// Package numa is numapref's view of the kernel: a task's forced preferred NUMA node
// (the proposed prctl PR_PREFERRED_NID, or an emulation of it), the NUMA topology from
// sysfs, the kernel's NUMA balancing state and the NUMA lines of /proc/<pid>/sched, and
// the proc connector's process events. Every reader takes its root (/proc, /sys, debugfs)
// explicitly, so tests run against fixture trees under testdata/.
//
// PreferredNode is what the node agent uses: Get and Set of one task's node. Two backends
// implement it, and the lower-level Raw (the prctl's arguments as such):
//   - Prctl, the real system call. It calls nothing until /proc/self/sched shows the
//     patch's numa_preferred_nid_force line: on Linux 6.16 and later option 78 is
//     PR_FUTEX_HASH.
//   - Emulator, the patch's semantics over a state directory, for kernels without it
//     (see emulator.go for what it reproduces and where it must guess).
//
// The conformance subpackage holds the cases both backends must pass.
//
// Probe gathers the node's kernel facts into a Report for the `probe` command.
package numa

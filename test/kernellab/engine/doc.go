// Package engine runs the node agent's apply engine (cgroup resolution, apply, fork events,
// rescans, undo) against the real PR_PREFERRED_NID prctl inside the kernel lab VM, on
// cgroup v2 with cpuset (hack/kernel/lab.sh); on the control kernel it checks that the
// engine reports KernelUnsupported without issuing prctl 78.
package engine

// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

// Package engine runs the node agent's apply engine (cgroup resolution, apply, fork events,
// rescans, undo) against the real PR_PREFERRED_NID prctl inside the kernel lab VM, on
// cgroup v2 with cpuset (hack/kernel/lab.sh); on the control kernel it checks that the
// engine reports KernelUnsupported without issuing prctl 78. In the patched boot it also
// measures how often a fork event arrives before the child is in its cgroup
// (TestForkEventBeforeCgroup) and churns thousands of processes with pid_max lowered until
// pids wrap around, asserting that no value lands on the wrong task
// (TestPIDReuseWraparound).
package engine

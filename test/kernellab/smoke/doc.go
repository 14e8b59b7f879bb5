// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

// Package smoke is the kernel lab's first test: run inside the lab VM by
// hack/kernel/run.sh, it proves that the booted kernel has the proposed
// PR_PREFERRED_NID prctl (or, on the control kernel, that it has not) and that
// qemu gave the VM two NUMA nodes. Outside the VM its tests skip.
package smoke

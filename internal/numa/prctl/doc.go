// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

// Package prctl is what can set a task's forced preferred NUMA node: the proposed prctl
// PR_PREFERRED_NID, its arguments and its real backend.
//
// Kernel is what the node agent uses: Get and Set of one task's node (code that only
// decides is given a numa.PreferredNodeReader instead). Raw is the prctl's arguments as
// such (CmdGet, CmdSet, UserPointer), for the conformance cases. Two backends implement
// both:
//   - Prctl, here (New): the real system call. It calls nothing until /proc/self/sched
//     shows the patch's numa_preferred_nid_force line: mainline took the option numbers
//     near the patch's (78 is PR_FUTEX_HASH on 6.16 and later, 79 PR_RSEQ_SLICE_EXTENSION
//     on 7.0; MainlineOption).
//   - emulator.Emulator, in package emulator: the patch's semantics over a state
//     directory, for kernels without it.
//
// The cases both backends must pass live in internal/testutil/conformance.
//
// Probe gathers the node's kernel facts into a Report for the `probe` command: it is here
// because proving the prctl issues one GET.
package prctl

// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

// Package mempolicy is a task's memory policy (set_mempolicy(2)) as numapref uses it: the
// Policy value, its names in the OCI runtime spec and in NRI, the strings
// /proc/<pid>/numa_maps prints for it, reading another task's policy from outside, a probe
// of the modes and flags this kernel takes, and Get and Set of the calling thread's own.
//
// Only the soft modes can be set or handed to a runtime: MPOL_PREFERRED (one node),
// MPOL_PREFERRED_MANY (a set, optionally with MPOL_F_NUMA_BALANCING), and MPOL_DEFAULT and
// MPOL_LOCAL to put a thread back. MPOL_BIND, MPOL_INTERLEAVE and MPOL_WEIGHTED_INTERLEAVE
// exist here only so that what another tool set can be read and reported; Set and OCI
// refuse them.
//
// What a policy does and does not do:
//   - It steers where a task's new pages are allocated, nothing else: pages already
//     allocated stay where they are, and the scheduler is not told where the task should run.
//   - Every thread and child inherits it, across fork and exec.
//   - Nothing can set it on a running process from outside. A runtime sets it in the
//     container's init before exec (linux.memoryPolicy of the OCI runtime spec).
//   - NUMA balancing scans only the mappings whose policy allows migrate on fault
//     (vma_policy_mof in mm/mempolicy.c). A task policy set through set_mempolicy has that
//     only with MPOL_F_NUMA_BALANCING, which the kernel takes with MPOL_BIND and
//     MPOL_PREFERRED_MANY only. So MPOL_PREFERRED, and MPOL_PREFERRED_MANY without the
//     flag, take the task out of NUMA balancing: no hinting faults, no page promotion, no
//     pull of the task toward its memory.
package mempolicy

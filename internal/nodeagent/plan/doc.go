// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

// Package plan decides what a pass of the engine does, and does none of it. From an Input
// (the desire, a read-only view of the ledger, the topology, a copy of the sticky choices,
// a kernel that can only GET, the cgroups' reader) it returns a Plan: for each container
// its Result so far, the SETs to issue, the ledger entry to write ahead of them, whether
// to undo it; the ledger's containers no longer desired; the processes it listed; and the
// automatic modes' choices of node with the sticky choices they leave.
//
// It is a package of its own so that the compiler keeps planning from acting: it imports
// nothing that can set a task's node, write the ledger or undo (test/layering checks its
// imports), holds no engine, and the engine hands it its kernel wrapped in a type that has
// only Get. Identifying a task (its pidfd and start time, held until the engine's SET) is
// here: it sets nothing.
//
//	plan.go      Input, Plan and Result; Full and One; admitting a container and planning
//	             its tasks
//	automatic.go the automatic modes' choice of node (FollowCPUs, Spread, MostFreeMemory)
//	             and the sticky choices
//	topology.go  the online nodes and the node of each CPU
//	identify.go  identifying the tasks to SET: pidfds and start times
//	share.go     a full pass's share of the ledger by namespace (TooManyTasks)
package plan

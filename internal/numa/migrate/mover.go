// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package migrate

// Mover moves a process's pages toward a node in bounded steps, with move_pages(2): each
// step reads where the pages of a run of addresses are, moves those on the from nodes, and
// reads again where they are, so that it counts what moved whatever the kernel reported
// (the tail pages of a huge page move with its head). The zero value is ready.
type Mover struct {
	// ProcRoot is where /proc is; "" is "/proc".
	ProcRoot string
	// Batch is the addresses of one move_pages call; 0 is 512.
	Batch int
	// ScanFactor bounds a step's addresses at ScanFactor times its budget; 0 is 64.
	ScanFactor int

	pages, moved []uintptr
	status       []int32
	nodes        []int32
	after        []int32
}

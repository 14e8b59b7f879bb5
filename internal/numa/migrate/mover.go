// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package migrate

// Mover moves a process's pages toward a node in bounded steps, with move_pages(2): each
// step reads where the pages of a run of addresses are, moves those on the from nodes, and
// reads again where they are, so that it counts what moved whatever the kernel reported
// (the kernel moves a transparent huge page whole at the first of its addresses, and
// answers EBUSY for the others). A batch ends at a huge page's boundary, so it holds every
// address of the huge pages it reaches and counts them all. The zero value is ready.
type Mover struct {
	// ProcRoot is where /proc is; "" is "/proc".
	ProcRoot string
	// Batch is the addresses of one move_pages call, at least; 0 is 512. A batch goes on to
	// the end of the huge page it reached.
	Batch int
	// ScanFactor bounds a step's addresses at ScanFactor times its budget; 0 is 64.
	ScanFactor int

	pages, moved []uintptr
	status       []int32
	nodes        []int32
	after        []int32
}

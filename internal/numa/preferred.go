// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package numa

// NoNode is NUMA_NO_NODE: no forced node.
const NoNode = -1

// PreferredNodeReader reads tasks' forced preferred node and can set none: what code
// that only decides is given of the kernel. What can also set it is package prctl's
// Kernel, which embeds this.
type PreferredNodeReader interface {
	Get(tid int) (int, error) // -1 = no forced node
}

// Support says whether a preferred-node backend (package prctl's, or the emulator) can be
// used, and why.
type Support struct {
	Supported bool   `json:"supported"`
	Backend   string `json:"backend"`
	Option    int    `json:"option"`
	Reason    string `json:"reason"`
}

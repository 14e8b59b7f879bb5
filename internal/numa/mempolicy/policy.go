// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package mempolicy

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/numapref/numapref/internal/numa"
)

// Mode is a memory policy mode, with the kernel's values (include/uapi/linux/mempolicy.h).
type Mode int

// The modes. Only ModeDefault, ModeLocal, ModePreferred and ModePreferredMany can be set
// (Set) or given to a runtime (OCI); the others are for reading what another tool set.
const (
	ModeDefault            Mode = 0
	ModePreferred          Mode = 1
	ModeBind               Mode = 2 // read only: a hard bound, never set by numapref
	ModeInterleave         Mode = 3 // read only
	ModeLocal              Mode = 4
	ModePreferredMany      Mode = 5 // Linux 5.15
	ModeWeightedInterleave Mode = 6 // read only; Linux 6.9
)

// Flags are the optional mode flags of set_mempolicy, with the kernel's bit values.
type Flags uint16

// The mode flags.
const (
	// FlagNumaBalancing keeps NUMA balancing scanning the task (the kernel sets
	// MPOL_F_MOF|MPOL_F_MORON with it). Taken with ModePreferredMany from Linux 6.10 (with
	// ModeBind from 5.12); with any other mode set_mempolicy fails with EINVAL.
	FlagNumaBalancing Flags = 1 << 13
	// FlagRelativeNodes and FlagStaticNodes say how the nodes follow a change of the
	// task's cpuset.mems. Read only here.
	FlagRelativeNodes Flags = 1 << 14
	FlagStaticNodes   Flags = 1 << 15

	allFlags = FlagNumaBalancing | FlagRelativeNodes | FlagStaticNodes
)

// ErrNotSoft means a policy that numapref does not set: a hard or spreading mode, or flags
// other than FlagNumaBalancing.
var ErrNotSoft = errors.New("not a soft memory policy")

// Policy is a task's memory policy: a mode, its nodes and its flags. The zero value is the
// default policy (allocate on the node the task runs on).
type Policy struct {
	Mode  Mode
	Nodes numa.NodeMask
	Flags Flags
}

// Preferred is MPOL_PREFERRED on node: allocate there first, anywhere when it is full.
func Preferred(node int) Policy {
	return Policy{Mode: ModePreferred, Nodes: numa.NewNodeMask(node)}
}

// PreferredMany is MPOL_PREFERRED_MANY on nodes: allocate on the nearest of them first,
// anywhere when they are full. With balancing the policy carries FlagNumaBalancing.
func PreferredMany(nodes numa.NodeMask, balancing bool) Policy {
	p := Policy{Mode: ModePreferredMany, Nodes: nodes}
	if balancing {
		p.Flags = FlagNumaBalancing
	}
	return p
}

// Equal reports whether p and q are the same policy.
func (p Policy) Equal(q Policy) bool {
	return p.Mode == q.Mode && p.Flags == q.Flags && slices.Equal(p.Nodes.IDs(), q.Nodes.IDs())
}

// Soft checks that p is a policy numapref may set: the default or local policy (no nodes,
// no flags), MPOL_PREFERRED on exactly one node without flags, or MPOL_PREFERRED_MANY on at
// least one node with no flag but FlagNumaBalancing. Otherwise the error wraps ErrNotSoft
// or says what is wrong with the nodes.
func (p Policy) Soft() error {
	n := len(p.Nodes.IDs())
	switch p.Mode {
	case ModeDefault, ModeLocal:
		if n != 0 || p.Flags != 0 {
			return fmt.Errorf("policy %s: %s takes no nodes and no flags", p, p.Mode)
		}
	case ModePreferred:
		if n != 1 {
			return fmt.Errorf("policy %s: %s takes exactly one node, not %d", p, p.Mode, n)
		}
		if p.Flags != 0 {
			return fmt.Errorf("policy %s: %w: %s takes no flags", p, ErrNotSoft, p.Mode)
		}
	case ModePreferredMany:
		if n == 0 {
			return fmt.Errorf("policy %s: %s takes at least one node", p, p.Mode)
		}
		if p.Flags&^FlagNumaBalancing != 0 {
			return fmt.Errorf("policy %s: %w: %s takes no flag but %s", p, ErrNotSoft, p.Mode, FlagNumaBalancing)
		}
	default:
		return fmt.Errorf("policy %s: %w", p, ErrNotSoft)
	}
	return nil
}

// Choose is the soft policy for a home on nodes that this kernel takes (s, from Probe):
// one node is MPOL_PREFERRED, several are MPOL_PREFERRED_MANY. With balancing the policy
// keeps NUMA balancing scanning the task, which only MPOL_PREFERRED_MANY with
// FlagNumaBalancing does: then one node is MPOL_PREFERRED_MANY too. When the kernel lacks
// what that needs, Choose says which and returns nothing.
func Choose(nodes numa.NodeMask, balancing bool, s Support) (Policy, error) {
	ids := nodes.IDs()
	switch {
	case len(ids) == 0:
		return Policy{}, errors.New("choosing a memory policy: no node")
	case balancing && !s.PreferredManyBalancing:
		return Policy{}, errors.New("choosing a memory policy: this kernel does not take MPOL_PREFERRED_MANY with MPOL_F_NUMA_BALANCING (Linux 6.10)")
	case balancing:
		return PreferredMany(nodes, true), nil
	case len(ids) == 1 && s.Preferred:
		return Preferred(ids[0]), nil
	case len(ids) == 1:
		return Policy{}, errors.New("choosing a memory policy: this kernel does not take MPOL_PREFERRED")
	case !s.PreferredMany:
		return Policy{}, errors.New("choosing a memory policy: this kernel does not take MPOL_PREFERRED_MANY (Linux 5.15)")
	}
	return PreferredMany(nodes, false), nil
}

// Support is what this kernel's set_mempolicy takes of the soft policies (Probe).
type Support struct {
	Preferred              bool // MPOL_PREFERRED
	PreferredMany          bool // MPOL_PREFERRED_MANY (Linux 5.15)
	PreferredManyBalancing bool // MPOL_PREFERRED_MANY | MPOL_F_NUMA_BALANCING (Linux 6.10)
	// Node is the node the probe set the policies on: the first this process may
	// allocate on. -1 when the kernel has no memory policies at all.
	Node int
}

// String prints the policy as the kernel does in /proc/<pid>/numa_maps (mpol_to_str in
// mm/mempolicy.c): the mode, "=" and the flags if any, ":" and the nodes if any:
// "default", "local", "prefer:1", "prefer (many)=balancing:0-1", "bind=static:0".
func (p Policy) String() string {
	var b strings.Builder
	b.WriteString(p.Mode.String())
	if f := p.Flags & allFlags; f != 0 {
		b.WriteByte('=')
		b.WriteString(f.String())
	}
	if ids := p.Nodes.IDs(); len(ids) > 0 {
		b.WriteByte(':')
		b.WriteString(numa.FormatList(ids))
	}
	return b.String()
}

// kernelModeNames are the mode names of mpol_to_str (policy_modes in mm/mempolicy.c).
// Parsing tries them in this order, longest first, since "prefer" starts "prefer (many)".
var kernelModeNames = []struct {
	mode Mode
	name string
}{
	{ModeWeightedInterleave, "weighted interleave"},
	{ModePreferredMany, "prefer (many)"},
	{ModeInterleave, "interleave"},
	{ModePreferred, "prefer"},
	{ModeDefault, "default"},
	{ModeLocal, "local"},
	{ModeBind, "bind"},
}

// String is the mode's name in /proc/<pid>/numa_maps ("prefer (many)").
func (m Mode) String() string {
	for _, k := range kernelModeNames {
		if k.mode == m {
			return k.name
		}
	}
	return fmt.Sprintf("mode(%d)", int(m))
}

// String prints the flags as mpol_to_str does: "static" or "relative" (never both), then
// "balancing", joined by "|".
func (f Flags) String() string {
	var parts []string
	switch {
	case f&FlagStaticNodes != 0:
		parts = append(parts, "static")
	case f&FlagRelativeNodes != 0:
		parts = append(parts, "relative")
	}
	if f&FlagNumaBalancing != 0 {
		parts = append(parts, "balancing")
	}
	if rest := f &^ allFlags; rest != 0 {
		parts = append(parts, fmt.Sprintf("%#x", uint16(rest)))
	}
	return strings.Join(parts, "|")
}

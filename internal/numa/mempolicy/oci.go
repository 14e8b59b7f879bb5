// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package mempolicy

import (
	"fmt"

	"github.com/numapref/numapref/internal/numa"
)

// OCIPolicy is a memory policy as the OCI runtime spec's linux.memoryPolicy and NRI's
// LinuxMemoryPolicy spell it: the mode's and flags' names and the nodes in the kernel's
// list format. The two use the same names (runtime-spec specs-go/config.go,
// MemoryPolicyModeType; NRI pkg/api/api.proto, MpolMode and MpolFlag).
//
// NRI's enums are not the kernel's numbers: MpolFlag counts 0, 1, 2 where the kernel has
// bits 15, 14, 13, and NRI maps an unknown name to MPOL_DEFAULT. Convert by name, never by
// value, and only names OCI returns.
type OCIPolicy struct {
	Mode  string
	Nodes string
	Flags []string
}

var ociModeNames = map[Mode]string{
	ModeDefault:            "MPOL_DEFAULT",
	ModePreferred:          "MPOL_PREFERRED",
	ModeBind:               "MPOL_BIND",
	ModeInterleave:         "MPOL_INTERLEAVE",
	ModeLocal:              "MPOL_LOCAL",
	ModePreferredMany:      "MPOL_PREFERRED_MANY",
	ModeWeightedInterleave: "MPOL_WEIGHTED_INTERLEAVE",
}

// ociFlagNames are in the order OCI lists them.
var ociFlagNames = []struct {
	flag Flags
	name string
}{
	{FlagStaticNodes, "MPOL_F_STATIC_NODES"},
	{FlagRelativeNodes, "MPOL_F_RELATIVE_NODES"},
	{FlagNumaBalancing, "MPOL_F_NUMA_BALANCING"},
}

// OCIName is the mode's name in the OCI runtime spec and NRI ("MPOL_PREFERRED_MANY"), or
// "" for a mode that has none.
func (m Mode) OCIName() string { return ociModeNames[m] }

// OCI is the policy for a runtime to set at a container's creation. Only a home can be
// given that way: MPOL_PREFERRED or MPOL_PREFERRED_MANY, as Soft allows them.
func (p Policy) OCI() (OCIPolicy, error) {
	if p.Mode != ModePreferred && p.Mode != ModePreferredMany {
		return OCIPolicy{}, fmt.Errorf("policy %s for a runtime: %w: only %s and %s are given at creation", p, ErrNotSoft, ModePreferred.OCIName(), ModePreferredMany.OCIName())
	}
	if err := p.Soft(); err != nil {
		return OCIPolicy{}, err
	}
	o := OCIPolicy{Mode: p.Mode.OCIName(), Nodes: p.Nodes.String()}
	for _, f := range ociFlagNames {
		if p.Flags&f.flag != 0 {
			o.Flags = append(o.Flags, f.name)
		}
	}
	return o, nil
}

// ParseOCI reads a policy in the OCI runtime spec's names, of any mode (what a runtime or
// another plugin set), with the checks runc makes (libcontainer/configs/validate): nodes
// for every mode but MPOL_DEFAULT and MPOL_LOCAL, which take none. An unknown name is an
// error, not MPOL_DEFAULT.
func ParseOCI(o OCIPolicy) (Policy, error) {
	var p Policy
	found := false
	for m, name := range ociModeNames {
		if name == o.Mode {
			p.Mode, found = m, true
		}
	}
	if !found {
		return Policy{}, fmt.Errorf("memory policy mode %q: unknown", o.Mode)
	}
	ids, err := numa.ParseList(o.Nodes)
	if err != nil {
		return Policy{}, fmt.Errorf("memory policy nodes %q: %w", o.Nodes, err)
	}
	p.Nodes = numa.NewNodeMask(ids...)
	switch {
	case (p.Mode == ModeDefault || p.Mode == ModeLocal) && len(ids) > 0:
		return Policy{}, fmt.Errorf("memory policy %s takes no nodes, got %q", o.Mode, o.Nodes)
	case p.Mode != ModeDefault && p.Mode != ModeLocal && p.Mode != ModePreferred && len(ids) == 0:
		return Policy{}, fmt.Errorf("memory policy %s needs at least one node", o.Mode)
	}
flags:
	for _, name := range o.Flags {
		for _, f := range ociFlagNames {
			if f.name == name {
				p.Flags |= f.flag
				continue flags
			}
		}
		return Policy{}, fmt.Errorf("memory policy flag %q: unknown", name)
	}
	return p, nil
}

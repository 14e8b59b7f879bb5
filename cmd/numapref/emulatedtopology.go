// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"

	"github.com/numapref/numapref/internal/cpuset"
	"github.com/numapref/numapref/internal/nodeagent/cgroups"
	"github.com/numapref/numapref/internal/numa"
)

// An emulated topology (-numa-topology-root, with -kernel=emulated only) makes the agent
// see a host of more NUMA nodes than this one has, for tests and demos of the modes that
// choose among nodes (FollowDevices, Spread) on a machine of one: the nodes, their CPUs and
// free memory are read under the fixture root, and the emulated kernel takes any of its
// nodes. A container's cpuset.mems that names every node this host really has is then
// read as every emulated node: it is no pin, only all the host could name.

// checkTopologyRoot refuses an emulated topology on a real kernel backend: the agent would
// set nodes the kernel does not have.
func checkTopologyRoot(f *agentFlags) error {
	if f.numaTopologyRoot != "" && f.kernel != "emulated" {
		return fmt.Errorf("agent: -numa-topology-root emulates a host's NUMA nodes: it needs -kernel=emulated, not %q", f.kernel)
	}
	return nil
}

// topologyRoot is where the agent reads the NUMA topology: the emulated one, or the host's.
func topologyRoot(f *agentFlags) string {
	if f.numaTopologyRoot != "" {
		return f.numaTopologyRoot
	}
	return filepath.Join(f.hostRoot, "sys")
}

// engineResolver is the resolver the engine reads cpusets through: the host's, or, on an
// emulated topology, one whose cpusets name the emulated nodes.
func engineResolver(f *agentFlags, h *agentHost) (cgroupsResolver, error) {
	if f.numaTopologyRoot == "" {
		return h.resolver, nil
	}
	real, err := numa.ReadOnline(filepath.Join(f.hostRoot, "sys"))
	if err != nil {
		return nil, errors.Join(errors.New("agent: reading this host's own NUMA nodes under an emulated topology"), err)
	}
	return emulatedCpusets{Resolver: h.resolver, real: real.Nodes, emulated: h.topo.Online}, nil
}

// cgroupsResolver is what the engine reads of the cgroups (nodeagent's cgroupResolver).
type cgroupsResolver interface {
	Resolve(cgroups.ContainerRef) (*cgroups.Container, error)
	ListTIDs(*cgroups.Container) ([]cgroups.TaskRef, error)
	ThreadIDs(*cgroups.Container) ([]int, error)
	Cpuset(*cgroups.Container) (cpuset.Cpuset, error)
}

// emulatedCpusets reads cpusets through the host's resolver, and a cpuset.mems of every
// real node as every emulated one.
type emulatedCpusets struct {
	*cgroups.Resolver
	real, emulated []int
}

func (e emulatedCpusets) Cpuset(c *cgroups.Container) (cpuset.Cpuset, error) {
	cs, err := e.Resolver.Cpuset(c)
	if err == nil && slices.Equal(cs.Mems, e.real) {
		cs.Mems = slices.Clone(e.emulated)
	}
	return cs, err
}

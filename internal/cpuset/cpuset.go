// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

// Package cpuset holds the set of CPUs and memory nodes a container's tasks may use, as
// the agent reads it from the container's cgroup (internal/nodeagent/cgroups) and as the
// inspect endpoint shows it (internal/inspect). It imports nothing, so that the kubectl
// plugin, which decodes the endpoint's answers, builds none of the agent's code.
package cpuset

// Cpuset is the set of CPUs and memory nodes a container's tasks may use. Its JSON form is
// also the inspect endpoint's (inspect.Cpuset): a field or tag changed here changes that
// schema, which only ever gains fields.
type Cpuset struct {
	// Mems are the memory nodes the tasks may allocate on (cpuset.effective_mems), and
	// CPUs the CPUs they may run on (cpuset.effective_cpus).
	Mems []int `json:"mems"`
	CPUs []int `json:"cpus"`
	// Dir is the cgroup directory the values were read from: the container's own or, on
	// v2 when the cpuset controller is not enabled down to it, the nearest ancestor's.
	Dir string `json:"dir,omitempty"`
	// ControllerMissing says no cpuset controller governs the container (v1 without a
	// cpuset hierarchy, v2 without cpuset enabled up to the root): Mems and CPUs are empty
	// and the container may use every CPU and node of the host.
	ControllerMissing bool `json:"controllerMissing,omitempty"`
}

// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package cgroups

import (
	"fmt"

	"github.com/numapref/numapref/internal/cpuset"
)

// ContainerReport is what the tasks subcommand prints: where a container's cgroup is, its
// cpuset and its tasks.
type ContainerReport struct {
	Layout    Layout           `json:"layout"`
	Cgroup    Container        `json:"cgroup"`
	Cpuset    cpuset.Cpuset    `json:"cpuset"`
	Processes int              `json:"processes"`
	Tasks     []IdentifiedTask `json:"tasks"`
}

// DescribeContainer resolves a container and reports its cgroup, cpuset and tasks with
// their identities.
func DescribeContainer(r *Resolver, ref ContainerRef) (ContainerReport, error) {
	c, err := r.Resolve(ref)
	if err != nil {
		return ContainerReport{}, fmt.Errorf("describing container: %w", err)
	}
	cs, err := r.Cpuset(c)
	if err != nil {
		return ContainerReport{}, fmt.Errorf("describing container: %w", err)
	}
	refs, err := r.ListTIDs(c)
	if err != nil {
		return ContainerReport{}, fmt.Errorf("describing container: %w", err)
	}
	tasks, err := r.Identify(c, refs)
	if err != nil {
		return ContainerReport{}, fmt.Errorf("describing container: %w", err)
	}
	procs := map[int]bool{}
	for _, t := range tasks {
		procs[t.TGID] = true
	}
	return ContainerReport{
		Layout:    r.Layout(),
		Cgroup:    *c,
		Cpuset:    cs,
		Processes: len(procs),
		Tasks:     tasks,
	}, nil
}

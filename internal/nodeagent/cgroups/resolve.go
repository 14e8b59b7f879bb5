// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package cgroups

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/numapref/numapref/internal/cpuset"
	"github.com/numapref/numapref/internal/fsutil"
	"github.com/numapref/numapref/internal/numa"
)

// Container is a container's cgroup as found on the host.
type Container struct {
	Ref ContainerRef `json:"ref"`
	// Runtime and ID come from Ref.ContainerID; Runtime is "" for a bare id.
	Runtime string `json:"runtime,omitempty"`
	ID      string `json:"id,omitempty"`
	// Path is the cgroup path relative to a hierarchy's root, as /proc/<pid>/cgroup shows
	// it: "/kubepods/burstable/pod<uid>/<id>".
	Path string `json:"path"`
	// TasksDir is the directory whose cgroup.procs and cgroup.threads (v2) or tasks (v1)
	// files, with those of its sub-cgroups, list the container's tasks.
	TasksDir string `json:"tasksDir"`
	// CpusetDir is the container's directory in the cpuset hierarchy: TasksDir on v2, ""
	// on v1 without a cpuset hierarchy.
	CpusetDir string `json:"cpusetDir,omitempty"`
}

// Resolve finds the cgroup directory of a container. It fails with an error wrapping
// ErrContainerNotFound when no candidate directory exists (the container exited or never
// ran here) and ErrInvalidContainerRef for a malformed reference.
func (r *Resolver) Resolve(ref ContainerRef) (*Container, error) {
	c := &Container{Ref: ref}
	var err error
	if ref.ContainerID != "" {
		if c.Runtime, c.ID, err = ParseContainerID(ref.ContainerID); err != nil {
			return nil, fmt.Errorf("resolving container cgroup: %w", err)
		}
	}
	candidates, err := r.candidatePaths(ref, c.Runtime, c.ID)
	if err != nil {
		return nil, fmt.Errorf("resolving container cgroup: %w", err)
	}
	for _, path := range candidates {
		if dir, ok := r.findTasksDir(path); ok {
			c.Path, c.TasksDir = path, dir
			c.CpusetDir = r.cpusetDir(path, dir)
			return c, nil
		}
	}
	return nil, fmt.Errorf("resolving cgroup of %s: none of %s exists under %s: %w",
		describeRef(ref), strings.Join(candidates, ", "), r.layout.Root, ErrContainerNotFound)
}

// candidatePaths lists the cgroup paths (relative to a hierarchy root) where the
// container may be, most likely first.
func (r *Resolver) candidatePaths(ref ContainerRef, runtime, id string) ([]string, error) {
	if ref.CgroupsPath != "" {
		p, err := ParseCgroupsPath(ref.CgroupsPath)
		if err != nil {
			return nil, err
		}
		return []string{p}, nil
	}
	if id == "" {
		return nil, fmt.Errorf("neither a container id nor a cgroups path: %w", ErrInvalidContainerRef)
	}
	if err := validatePodUID(ref.PodUID); err != nil {
		return nil, err
	}
	levels, err := qosLevels(ref.QOS)
	if err != nil {
		return nil, err
	}
	leaves := containerLeaves(r.layout.Driver, runtime, id)
	paths := make([]string, 0, len(levels)*len(leaves))
	for _, level := range levels {
		name := podCgroupName(r.rootNames, level, ref.PodUID)
		var pod string
		if r.layout.Driver == DriverSystemd {
			if pod, err = systemdName(name); err != nil {
				return nil, err
			}
		} else {
			pod = cgroupfsName(name)
		}
		for _, leaf := range leaves {
			paths = append(paths, pod+"/"+leaf)
		}
	}
	return paths, nil
}

// findTasksDir returns the directory listing the tasks of cgroup path: on v1 the first
// task hierarchy holding it.
func (r *Resolver) findTasksDir(path string) (string, bool) {
	for _, base := range r.hierarchyDirs() {
		dir := filepath.Join(base, path)
		if dirExists(dir) {
			return dir, true
		}
	}
	return "", false
}

func (r *Resolver) cpusetDir(path, tasksDir string) string {
	if r.layout.Version == 2 {
		return tasksDir
	}
	if r.layout.CpusetHierarchy == "" {
		return ""
	}
	return filepath.Join(r.layout.Root, r.layout.CpusetHierarchy, path)
}

func describeRef(ref ContainerRef) string {
	if ref.ContainerID == "" {
		return fmt.Sprintf("cgroups path %q", ref.CgroupsPath)
	}
	return fmt.Sprintf("container %s of pod %s (qos %q)", ref.ContainerID, ref.PodUID, ref.QOS)
}

// Cpuset reads the container's effective cpuset: cpuset.cpus.effective and
// cpuset.mems.effective on v2, cpuset.effective_cpus and cpuset.effective_mems on v1
// (cpuset.cpus and cpuset.mems on kernels without the effective files). A missing cpuset
// controller gives an empty Cpuset with ControllerMissing set and no error; a vanished
// container gives ErrContainerNotFound.
func (r *Resolver) Cpuset(c *Container) (cpuset.Cpuset, error) {
	if c.CpusetDir == "" {
		return cpuset.Cpuset{ControllerMissing: true}, nil
	}
	if !dirExists(c.CpusetDir) {
		return cpuset.Cpuset{}, fmt.Errorf("reading cpuset of %s: %s: %w", c.Path, c.CpusetDir, ErrContainerNotFound)
	}
	if r.layout.Version == 2 {
		// Without the controller enabled in its parent's subtree_control, a cgroup has no
		// cpuset files and uses its nearest cpuset-enabled ancestor's effective set.
		root := filepath.Clean(r.layout.Root)
		for dir := filepath.Clean(c.CpusetDir); ; dir = filepath.Dir(dir) {
			cs, found, err := readCpusetFiles(dir, "cpuset.cpus.effective", "cpuset.mems.effective")
			if err != nil || found {
				return cs, err
			}
			if dir == filepath.Clean(c.CpusetDir) && !dirExists(dir) {
				return cpuset.Cpuset{}, fmt.Errorf("reading cpuset of %s: %s: %w", c.Path, dir, ErrContainerNotFound)
			}
			if dir == root || !strings.HasPrefix(dir, root+string(filepath.Separator)) {
				return cpuset.Cpuset{ControllerMissing: true}, nil
			}
		}
	}
	cs, found, err := readCpusetFiles(c.CpusetDir, "cpuset.effective_cpus", "cpuset.effective_mems")
	if err != nil || found {
		return cs, err
	}
	cs, found, err = readCpusetFiles(c.CpusetDir, "cpuset.cpus", "cpuset.mems")
	if err != nil || found {
		return cs, err
	}
	if !dirExists(c.CpusetDir) {
		return cpuset.Cpuset{}, fmt.Errorf("reading cpuset of %s: %s: %w", c.Path, c.CpusetDir, ErrContainerNotFound)
	}
	return cpuset.Cpuset{ControllerMissing: true}, nil
}

// readCpusetFiles reads a cpus and a mems list from dir; found is false when either file
// does not exist.
func readCpusetFiles(dir, cpusFile, memsFile string) (cs cpuset.Cpuset, found bool, err error) {
	buf := getScratch()
	defer putScratch(buf)
	cs.Dir = dir
	for _, f := range []struct {
		name string
		dst  *[]int
	}{{cpusFile, &cs.CPUs}, {memsFile, &cs.Mems}} {
		data, err := fsutil.ReadFileInto(filepath.Join(dir, f.name), buf)
		if errors.Is(err, os.ErrNotExist) {
			return cpuset.Cpuset{}, false, nil
		}
		if err != nil {
			return cpuset.Cpuset{}, false, cpusetReadError(dir, f.name, err)
		}
		if *f.dst, err = numa.ParseList(string(data)); err != nil {
			return cpuset.Cpuset{}, false, fmt.Errorf("reading %s of %s: %w", f.name, dir, err)
		}
	}
	return cs, true, nil
}

func cpusetReadError(dir, file string, err error) error {
	if IsGone(err) {
		return fmt.Errorf("reading %s of %s: %w: %w", file, dir, ErrContainerNotFound, err)
	}
	return fmt.Errorf("reading %s of %s: %w", file, dir, err)
}

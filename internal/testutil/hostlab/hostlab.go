// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

// Package hostlab builds kubepods-shaped cgroup trees on this host's real cgroup
// hierarchies and runs real multi-threaded workloads in them, so the agent's code can be
// tested, benchmarked and demonstrated on real cgroups and processes without a kubelet.
//
// A Lab owns a kubelet cgroup root of its own ("/numapref-lab-<pid>-<n>") in every
// hierarchy it uses, so it never touches cgroups it did not make, and Close removes
// everything it made. It needs root.
package hostlab

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/numapref/numapref/internal/testutil/poll"
)

const labPrefix = "numapref-lab-"

var labSeq atomic.Int32

// Lab is one test-owned kubelet cgroup root with its containers and workloads.
type Lab struct {
	root      string   // where cgroup filesystems are mounted
	name      string   // the lab's top cgroup in every hierarchy
	version   int      // 1 or 2
	hiers     []string // hierarchy dirs the lab uses (v2: just root)
	cpusetDir string   // the hierarchy holding cpusets ("" if none)
	workloads []*Workload
}

// New makes a lab under cgroupRoot (normally /sys/fs/cgroup). Labs left behind by dead
// processes are removed first.
func New(cgroupRoot string) (*Lab, error) {
	l := &Lab{root: cgroupRoot, name: fmt.Sprintf("%s%d-%d", labPrefix, os.Getpid(), labSeq.Add(1))}
	if _, err := os.Stat(filepath.Join(cgroupRoot, "cgroup.controllers")); err == nil {
		l.version, l.hiers, l.cpusetDir = 2, []string{cgroupRoot}, cgroupRoot
	} else {
		l.version = 1
		for _, h := range []string{"pids", "cpuset", "systemd"} {
			if _, err := os.Stat(filepath.Join(cgroupRoot, h, "cgroup.procs")); err == nil {
				l.hiers = append(l.hiers, filepath.Join(cgroupRoot, h))
			}
		}
		if len(l.hiers) == 0 {
			return nil, fmt.Errorf("no cgroup v1 hierarchy (pids, cpuset, systemd) under %s", cgroupRoot)
		}
		if slices.Contains(l.hiers, filepath.Join(cgroupRoot, "cpuset")) {
			l.cpusetDir = filepath.Join(cgroupRoot, "cpuset")
		}
	}
	removeStaleLabs(l.hiers)
	for _, h := range l.hiers {
		if err := l.mkdir(h, l.name); err != nil {
			l.Close()
			return nil, err
		}
	}
	return l, nil
}

// Version is the cgroup version of the host: 1 or 2.
func (l *Lab) Version() int { return l.version }

// CgroupRoot is where the cgroup filesystems are mounted.
func (l *Lab) CgroupRoot() string { return l.root }

// KubeletCgroupRoot is the lab's root as kubelet's cgroupRoot setting would name it.
func (l *Lab) KubeletCgroupRoot() string { return "/" + l.name }

// Container is one container's cgroup in the lab (cgroupfs driver, containerd naming).
type Container struct {
	lab  *Lab
	path string // relative to each hierarchy
	// ContainerID is the containerd form, as pod status reports it.
	ContainerID string
}

// IDsOf is a pod UID and a 64-hex container id made of name, the same for the same name.
func IDsOf(name string) (podUID, containerID string) {
	id := fmt.Sprintf("%x", sha256.Sum256([]byte(name)))
	return id[:8] + "-" + id[8:12] + "-" + id[12:16] + "-" + id[16:20] + "-" + id[20:32], id
}

// NamedWorkload makes the container of a pod of QoS class qos whose UID and container id
// are made of name (IDsOf), and starts a workload with threads extra threads in it.
func (l *Lab) NamedWorkload(qos corev1.PodQOSClass, name string, threads int) (podUID string, c *Container, w *Workload, err error) {
	podUID, id := IDsOf(name)
	if c, err = l.Container(qos, podUID, id); err != nil {
		return "", nil, nil, err
	}
	w, err = c.StartWorkload(threads)
	return podUID, c, w, err
}

// Container makes the cgroup of one container of pod podUID with QoS class qos, the way
// kubelet's cgroupfs driver names it, and returns it. id is the 64-hex container id.
func (l *Lab) Container(qos corev1.PodQOSClass, podUID, id string) (*Container, error) {
	parts := []string{l.name, "kubepods"}
	switch qos {
	case corev1.PodQOSBurstable:
		parts = append(parts, "burstable")
	case corev1.PodQOSBestEffort:
		parts = append(parts, "besteffort")
	case corev1.PodQOSGuaranteed:
	default:
		return nil, fmt.Errorf("unknown QoS class %q", qos)
	}
	parts = append(parts, "pod"+podUID, id)
	for _, h := range l.hiers {
		dir := h
		for _, p := range parts {
			if err := l.mkdir(dir, p); err != nil {
				return nil, err
			}
			dir = filepath.Join(dir, p)
		}
	}
	return &Container{lab: l, path: filepath.Join(parts...), ContainerID: "containerd://" + id}, nil
}

// Path is the container's cgroup path, relative to each hierarchy's root.
func (c *Container) Path() string { return c.path }

// SetMems sets the container's cpuset.mems (the kernel list format, "0").
func (c *Container) SetMems(mems string) error { return c.setCpuset("cpuset.mems", mems) }

// SetCPUs sets the container's cpuset.cpus (the kernel list format, "1").
func (c *Container) SetCPUs(cpus string) error { return c.setCpuset("cpuset.cpus", cpus) }

func (c *Container) setCpuset(file, value string) error {
	if c.lab.cpusetDir == "" {
		return errors.New("no cpuset hierarchy on this host")
	}
	if c.lab.version == 2 {
		if err := c.lab.enableCpuset(c.path); err != nil {
			return err
		}
	}
	f := filepath.Join(c.lab.cpusetDir, c.path, file)
	if err := os.WriteFile(f, []byte(value), 0); err != nil {
		return fmt.Errorf("writing %s: %w", f, err)
	}
	return nil
}

// EnableMemory turns on the memory controller for the container (cgroup v2), so that it
// has memory.numa_stat, as a kubelet's containers do. Call it before any task joins.
func (c *Container) EnableMemory() error {
	if c.lab.version != 2 {
		return errors.New("EnableMemory is for cgroup v2: v1's memory hierarchy is not in the lab")
	}
	return c.lab.enableController(c.path, "memory")
}

// enableCpuset turns on the cpuset controller down to path's parent (cgroup v2).
func (l *Lab) enableCpuset(path string) error { return l.enableController(path, "cpuset") }

// enableController turns on controller down to path's parent (cgroup v2).
func (l *Lab) enableController(path, controller string) error {
	dir := l.root
	for _, p := range strings.Split(path, string(filepath.Separator)) {
		f := filepath.Join(dir, "cgroup.subtree_control")
		if err := os.WriteFile(f, []byte("+"+controller), 0); err != nil {
			return fmt.Errorf("enabling %s in %s: %w", controller, f, err)
		}
		dir = filepath.Join(dir, p)
	}
	return nil
}

// Dirs returns the container's cgroup directory in every hierarchy the lab uses: a
// process that runs without the Lab (another PID namespace's) attaches a task by writing
// its id to cgroup.procs in each.
func (c *Container) Dirs() []string {
	dirs := make([]string, len(c.lab.hiers))
	for i, h := range c.lab.hiers {
		dirs[i] = filepath.Join(h, c.path)
	}
	return dirs
}

// Attach moves process pid (all its threads) into the container in every hierarchy.
func (c *Container) Attach(pid int) error {
	for _, h := range c.lab.hiers {
		f := filepath.Join(h, c.path, "cgroup.procs")
		if err := os.WriteFile(f, []byte(strconv.Itoa(pid)), 0); err != nil {
			return fmt.Errorf("moving %d into %s: %w", pid, f, err)
		}
	}
	return nil
}

// mkdir makes parent/name; on cgroup v1's cpuset hierarchy it also copies cpus and mems
// from the parent, without which no task can join.
func (l *Lab) mkdir(parent, name string) error {
	dir := filepath.Join(parent, name)
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("creating cgroup %s: %w", dir, err)
	}
	if l.version == 1 && strings.HasPrefix(dir, l.cpusetDir+string(filepath.Separator)) && l.cpusetDir != "" {
		for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
			v, err := os.ReadFile(filepath.Join(parent, f))
			if err != nil {
				return fmt.Errorf("reading %s of %s: %w", f, parent, err)
			}
			if err := os.WriteFile(filepath.Join(dir, f), v, 0); err != nil {
				return fmt.Errorf("writing %s of %s: %w", f, dir, err)
			}
		}
	}
	return nil
}

// Close stops every workload and removes every cgroup the lab made.
func (l *Lab) Close() error {
	for _, w := range l.workloads {
		w.Stop()
	}
	var errs []error
	for _, h := range l.hiers {
		if err := removeTree(filepath.Join(h, l.name)); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// removeTree kills what still runs in dir's cgroups, moves nothing, and removes them
// deepest first. Killing is safe: only the lab's own processes can be in a lab cgroup.
func removeTree(dir string) error {
	var dirs []string
	// The walk skips what it cannot read, so it returns no error.
	_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	slices.Reverse(dirs)
	for _, d := range dirs {
		if err := poll.Until(5*time.Second, func() error {
			err := os.Remove(d)
			if err == nil || errors.Is(err, os.ErrNotExist) {
				return nil
			}
			killAll(d)
			return err
		}); err != nil {
			return fmt.Errorf("removing cgroup %s: %w", d, err)
		}
	}
	return nil
}

func killAll(dir string) {
	data, _ := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	for _, f := range strings.Fields(string(data)) {
		if pid, err := strconv.Atoi(f); err == nil && pid > 0 {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// removeStaleLabs removes labs whose owning process is gone (a test binary that crashed).
func removeStaleLabs(hiers []string) {
	for _, h := range hiers {
		entries, _ := os.ReadDir(h)
		for _, e := range entries {
			rest, ok := strings.CutPrefix(e.Name(), labPrefix)
			if !ok || !e.IsDir() {
				continue
			}
			pidStr, _, _ := strings.Cut(rest, "-")
			pid, err := strconv.Atoi(pidStr)
			if err != nil || syscall.Kill(pid, 0) == nil {
				continue // malformed, or its owner is alive
			}
			_ = removeTree(filepath.Join(h, e.Name())) // best effort: the next lab tries again
		}
	}
}

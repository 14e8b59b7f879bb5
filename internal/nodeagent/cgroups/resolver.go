// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package cgroups

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"syscall"

	corev1 "k8s.io/api/core/v1"
)

// Errors callers can test with errors.Is.
var (
	// ErrContainerNotFound means the container's cgroup directory does not exist (any more):
	// the container exited, was never started on this node, or the reference is stale.
	ErrContainerNotFound = errors.New("container cgroup not found")
	// ErrInvalidContainerRef means a pod UID, QoS class, container ID or cgroups path is
	// malformed. Such a reference can never resolve; retrying does not help.
	ErrInvalidContainerRef = errors.New("invalid container reference")
	// ErrUnknownLayout means the cgroup version or driver could not be told by probing.
	ErrUnknownLayout = errors.New("cgroup layout not recognized")
	// ErrForeignPIDNamespace means a cgroup lists tasks that are invisible from this PID
	// namespace (shown as pid 0): the agent runs without hostPID and would see a partial list.
	ErrForeignPIDNamespace = errors.New("cgroup holds tasks outside this PID namespace")
)

// Cgroup drivers, as in kubelet's cgroupDriver setting.
const (
	DriverCgroupfs = "cgroupfs"
	DriverSystemd  = "systemd"
)

// Sources of a Layout field.
const (
	SourceProbe  = "probe"
	SourceOption = "option"
)

// ContainerRef names one container of a pod the way the API server reports it.
type ContainerRef struct {
	// PodUID is the UID the kubelet uses for the pod's cgroup: metadata.uid for API pods,
	// the 32-hex config hash for static pods (see PodUID for mirror pods).
	PodUID string `json:"podUID,omitempty"`
	// QOS is status.qosClass. Empty means unknown: every class is tried.
	QOS corev1.PodQOSClass `json:"qos,omitempty"`
	// ContainerID is status.containerStatuses[].containerID, "<runtime>://<id>" with the
	// runtime containerd, cri-o or docker. A bare id is accepted; every runtime's naming is
	// then tried.
	ContainerID string `json:"containerID,omitempty"`
	// CgroupsPath is an optional runtime-reported cgroups path (linux.cgroupsPath of the OCI
	// spec): "kubepods-burstable-pod<uid>.slice:cri-containerd:<id>" for systemd, or
	// "/kubepods/burstable/pod<uid>/<id>" for cgroupfs. When set it wins over the names
	// derived from the other fields.
	CgroupsPath string `json:"cgroupsPath,omitempty"`
}

// ResolverOptions override what NewResolver would otherwise probe.
type ResolverOptions struct {
	// Version is the cgroup version: 0 probes, 1 or 2 forces it.
	Version int
	// Driver is "" to probe, DriverSystemd or DriverCgroupfs.
	Driver string
	// CgroupRoot is where the cgroup filesystems are mounted: the cgroup2 mount (v2) or the
	// directory holding one directory per v1 hierarchy. Default <hostRoot>/sys/fs/cgroup.
	CgroupRoot string
	// KubeletCgroupRoot is kubelet's cgroupRoot setting (default "/"): the cgroup, inside
	// every hierarchy, under which kubelet makes kubepods. With the systemd driver its
	// components prefix the slice names as kubelet does it ("/kubelet" gives
	// kubelet.slice/kubelet-kubepods.slice/...).
	KubeletCgroupRoot string
}

// Layout is what a Resolver found, or was told, about the node's cgroups.
type Layout struct {
	Version       int    `json:"version"`
	VersionSource string `json:"versionSource"`
	Driver        string `json:"driver"`
	DriverSource  string `json:"driverSource"`
	// Root is the cgroup mount root (v2) or the directory of the v1 hierarchies.
	Root              string `json:"root"`
	KubeletCgroupRoot string `json:"kubeletCgroupRoot,omitempty"`
	// TaskHierarchies (v1 only) are the hierarchy directories under Root searched, in
	// this order, for a container's task lists.
	TaskHierarchies []string `json:"taskHierarchies,omitempty"`
	// CpusetHierarchy (v1 only) is the cpuset hierarchy's directory under Root, "" if the
	// cpuset controller is not mounted.
	CpusetHierarchy string `json:"cpusetHierarchy,omitempty"`
}

// Resolver maps containers to their cgroup directories, task lists and cpusets on one
// host. It only reads files and is safe for concurrent use.
type Resolver struct {
	procRoot  string
	layout    Layout
	rootNames []string // KubeletCgroupRoot split into cgroup name components

	// walkHook, when set (tests only), runs before ListTIDs descends into a sub-cgroup.
	walkHook func(dir string)
}

// v1TaskHierarchies are the v1 hierarchy directories, in the order they are searched for
// a container's tasks. pids and name=systemd hold every container task on any kubelet
// node; the others are fallbacks for nodes that lack both.
var v1TaskHierarchies = []string{"pids", "systemd", "freezer", "cpuset", "memory", "cpu,cpuacct", "cpu", "cpuacct", "devices", "blkio"}

const v1CpusetHierarchy = "cpuset"

// NewResolver makes a Resolver for the host whose filesystem is at hostRoot ("" or "/" for
// the agent's own root; "/host" when the host's /proc and /sys are mounted there). The
// cgroup version is probed from cgroup.controllers at the cgroup root (present only on
// cgroup2), the driver from kubepods.slice versus kubepods under the kubelet cgroup root;
// opts overrides either.
//
// Task ids in cgroup files are those of the reader's PID namespace: the agent must share
// the host's (hostPID) for the ids to match <hostRoot>/proc.
func NewResolver(hostRoot string, opts ResolverOptions) (*Resolver, error) {
	if hostRoot == "" {
		hostRoot = "/"
	}
	root := opts.CgroupRoot
	if root == "" {
		root = filepath.Join(hostRoot, "sys", "fs", "cgroup")
	}
	rootNames, err := parseKubeletCgroupRoot(opts.KubeletCgroupRoot)
	if err != nil {
		return nil, fmt.Errorf("creating cgroup resolver: %w", err)
	}
	r := &Resolver{
		procRoot:  filepath.Join(hostRoot, "proc"),
		rootNames: rootNames,
		layout: Layout{
			Root:              root,
			KubeletCgroupRoot: opts.KubeletCgroupRoot,
		},
	}
	if err := checkPIDNamespace(r.procRoot); err != nil {
		return nil, fmt.Errorf("creating cgroup resolver: %w", err)
	}
	if err := r.detectVersion(opts.Version); err != nil {
		return nil, fmt.Errorf("creating cgroup resolver: %w", err)
	}
	if err := r.detectDriver(opts.Driver); err != nil {
		return nil, fmt.Errorf("creating cgroup resolver: %w", err)
	}
	return r, nil
}

// Layout returns the detected (or configured) cgroup layout.
func (r *Resolver) Layout() Layout {
	l := r.layout
	l.TaskHierarchies = append([]string(nil), l.TaskHierarchies...)
	return l
}

// ProcRoot returns <hostRoot>/proc.
func (r *Resolver) ProcRoot() string { return r.procRoot }

func (r *Resolver) detectVersion(forced int) error {
	root := r.layout.Root
	info, err := os.Stat(root)
	if err != nil {
		return fmt.Errorf("reading cgroup root: %w", err)
	}
	if !info.IsDir() {
		return fmt.Errorf("cgroup root %s is not a directory: %w", root, ErrUnknownLayout)
	}
	switch forced {
	case 0:
		r.layout.VersionSource = SourceProbe
		if fileExists(filepath.Join(root, "cgroup.controllers")) {
			r.layout.Version = 2
			return nil
		}
		r.layout.Version = 1
	case 1, 2:
		r.layout.VersionSource = SourceOption
		r.layout.Version = forced
		if forced == 2 {
			return nil
		}
	default:
		return fmt.Errorf("cgroup version %d: want 0 (probe), 1 or 2: %w", forced, ErrUnknownLayout)
	}
	for _, h := range v1TaskHierarchies {
		if fileExists(filepath.Join(root, h, "tasks")) {
			r.layout.TaskHierarchies = append(r.layout.TaskHierarchies, h)
		}
	}
	if len(r.layout.TaskHierarchies) == 0 {
		return fmt.Errorf("no cgroup2 mount and no cgroup v1 hierarchy (%v) under %s: %w",
			v1TaskHierarchies, root, ErrUnknownLayout)
	}
	if fileExists(filepath.Join(root, v1CpusetHierarchy, "tasks")) {
		r.layout.CpusetHierarchy = v1CpusetHierarchy
	}
	return nil
}

func (r *Resolver) detectDriver(forced string) error {
	switch forced {
	case DriverCgroupfs, DriverSystemd:
		r.layout.Driver, r.layout.DriverSource = forced, SourceOption
		return nil
	case "":
	default:
		return fmt.Errorf("cgroup driver %q: want %q or %q: %w", forced, DriverCgroupfs, DriverSystemd, ErrUnknownLayout)
	}
	r.layout.DriverSource = SourceProbe
	kubepods := append(append([]string(nil), r.rootNames...), "kubepods")
	cgroupfsDir := cgroupfsName(kubepods)
	systemdDir, err := systemdName(kubepods)
	if err != nil {
		return err
	}
	var found []string
	for _, base := range r.hierarchyDirs() {
		if dirExists(filepath.Join(base, cgroupfsDir)) {
			found = append(found, DriverCgroupfs)
		}
		if dirExists(filepath.Join(base, systemdDir)) {
			found = append(found, DriverSystemd)
		}
		if len(found) > 0 {
			break
		}
	}
	switch len(found) {
	case 1:
		r.layout.Driver = found[0]
		return nil
	case 0:
		return fmt.Errorf("neither %s nor %s exists under %s (is kubelet running with cgroupsPerQOS?); set the driver explicitly: %w",
			cgroupfsDir, systemdDir, r.layout.Root, ErrUnknownLayout)
	default:
		return fmt.Errorf("both %s and %s exist under %s; set the driver explicitly: %w",
			cgroupfsDir, systemdDir, r.layout.Root, ErrUnknownLayout)
	}
}

// hierarchyDirs returns the directories a cgroup path is relative to, in search order:
// the root itself on v2, each task hierarchy on v1.
func (r *Resolver) hierarchyDirs() []string {
	if r.layout.Version == 2 {
		return []string{r.layout.Root}
	}
	dirs := make([]string, len(r.layout.TaskHierarchies))
	for i, h := range r.layout.TaskHierarchies {
		dirs[i] = filepath.Join(r.layout.Root, h)
	}
	return dirs
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

func dirExists(path string) bool {
	info, err := os.Stat(path)
	return err == nil && info.IsDir()
}

// IsGone reports whether err says a cgroup (or task) no longer exists. Files of a cgroup
// removed while open read as ENODEV.
func IsGone(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENODEV) || errors.Is(err, syscall.ESRCH)
}

// checkPIDNamespace fails when procRoot is a proc filesystem of another PID namespace than
// the agent's: cgroup files list ids of the reader's namespace, which would then name other
// tasks (or none) in procRoot. <procRoot>/self names the reader in procRoot's namespace.
// A procRoot without "self" (a fixture tree) is not checked.
func checkPIDNamespace(procRoot string) error {
	self, err := os.Readlink(filepath.Join(procRoot, "self"))
	if err != nil {
		return nil
	}
	pid, err := strconv.Atoi(self)
	if err != nil || pid == os.Getpid() {
		return nil
	}
	return fmt.Errorf("%s belongs to another PID namespace (this process is %s there, %d here); run in the host PID namespace (hostPID): %w",
		procRoot, self, os.Getpid(), ErrForeignPIDNamespace)
}

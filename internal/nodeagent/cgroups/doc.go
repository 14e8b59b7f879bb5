// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

// Package cgroups finds a Kubernetes container's cgroup on its node and lists the tasks in
// it: pod UID, QoS class and container ID (a ContainerRef, as the API server reports them)
// → the cgroup directory the kubelet and the runtime made for the container (a Container)
// → its cpuset and its tasks (TaskRef: thread and process ids).
//
// A Resolver knows one host's layout: cgroup v1 or v2, the cgroupfs or systemd driver,
// kubelet's cgroup root, and the naming of containerd, CRI-O and Docker (cri-dockerd). It
// probes what it is not told (NewResolver), takes the host root as an argument ("/host"
// when the host's /proc and /sys are mounted there), and only reads files, so tests run it
// on the fixture trees under testdata/host.
//
// A listing is a snapshot: task ids may be reused as soon as a task exits. Identify pins
// listed tasks to their start times (numa.Task), and numa.Task.Verify tells later whether
// an id still names the same task. DescribeContainer puts it all in one report, what
// `numapref tasks` prints.
//
// Of this module the package imports only packages numa, cpuset and fsutil; the engine
// (package nodeagent) uses it through a small interface of its own. Tests of the fixture
// trees are the unit tier; those that build kubepods trees on this machine's real cgroups
// are the host tier (build tag host, root).
package cgroups

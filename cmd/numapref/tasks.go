// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"flag"
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/numapref/numapref/internal/nodeagent/cgroups"
)

func runTasks(args []string) error {
	fs := flag.NewFlagSet("tasks", flag.ContinueOnError)
	hostRoot := fs.String("host-root", "/", "where the host's /proc and /sys are mounted")
	podUID := fs.String("pod-uid", "", "the pod's UID")
	qos := fs.String("qos", "", "the pod's QoS class: Guaranteed, Burstable or BestEffort")
	containerID := fs.String("container-id", "", `the container ID as in pod status, e.g. "containerd://<64 hex>"`)
	cgroupsPath := fs.String("cgroups-path", "", "a runtime-reported cgroups path, instead of pod UID and container ID")
	version := fs.Int("cgroup-version", 0, "cgroup version (1 or 2); 0 probes")
	driver := fs.String("cgroup-driver", "", `cgroup driver ("systemd" or "cgroupfs"); empty probes`)
	cgroupRoot := fs.String("cgroup-root", "", "where the cgroup filesystems are mounted (default <host-root>/sys/fs/cgroup)")
	kubeletRoot := fs.String("kubelet-cgroup-root", "/", `kubelet's cgroupRoot setting ("/kubelet" on kind)`)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *cgroupsPath == "" && (*podUID == "" || *containerID == "") {
		return fmt.Errorf("tasks: give -pod-uid, -qos and -container-id, or -cgroups-path")
	}
	r, err := cgroups.NewResolver(*hostRoot, cgroups.ResolverOptions{
		Version: *version, Driver: *driver, CgroupRoot: *cgroupRoot, KubeletCgroupRoot: *kubeletRoot,
	})
	if err != nil {
		return err
	}
	rep, err := cgroups.DescribeContainer(r, cgroups.ContainerRef{
		PodUID: *podUID, QOS: corev1.PodQOSClass(*qos), ContainerID: *containerID, CgroupsPath: *cgroupsPath,
	})
	if err != nil {
		return err
	}
	return printJSON(rep)
}

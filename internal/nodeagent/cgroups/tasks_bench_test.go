// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package cgroups

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// v2ControlFiles are the interface files of a cgroup2 container directory on a node with
// the usual controllers, so a fixture directory costs as much to list as a real one.
var v2ControlFiles = strings.Fields(`cgroup.controllers cgroup.events cgroup.freeze cgroup.kill
	cgroup.max.depth cgroup.max.descendants cgroup.pressure cgroup.stat cgroup.subtree_control
	cgroup.type cpu.idle cpu.max cpu.max.burst cpu.pressure cpu.stat cpu.stat.local
	cpu.uclamp.max cpu.uclamp.min cpu.weight cpu.weight.nice cpuset.cpus cpuset.cpus.exclusive
	cpuset.cpus.exclusive.effective cpuset.cpus.partition cpuset.mems hugetlb.2MB.current
	hugetlb.2MB.events hugetlb.2MB.max io.max io.pressure io.prio.class io.stat io.weight
	memory.current memory.events memory.events.local memory.high memory.low memory.max
	memory.min memory.numa_stat memory.oom.group memory.peak memory.pressure memory.stat
	memory.swap.current memory.swap.events memory.swap.max pids.current pids.events pids.max
	pids.peak`)

// benchContainers writes a cgroup2, cgroupfs-driver fixture host with n Burstable pods of
// one container each, every container one process with threads threads, and returns the
// references to resolve.
func benchContainers(b *testing.B, n, threads int) (hostRoot string, refs []ContainerRef) {
	b.Helper()
	hostRoot = b.TempDir()
	files := map[string]string{
		"cgroup/cgroup.controllers":    "cpuset cpu io memory hugetlb pids\n",
		"cgroup/cpuset.cpus.effective": "0-63\n",
		"cgroup/cpuset.mems.effective": "0-1\n",
	}
	for i := range n {
		uid := fmt.Sprintf("00000000-0000-4000-8000-%012d", i)
		id := fmt.Sprintf("%064x", i+1)
		dir := fmt.Sprintf("cgroup/kubepods/burstable/pod%s/%s/", uid, id)
		tgid := 10000 + i*threads
		tids := make([]int, threads)
		for j := range tids {
			tids[j] = tgid + j
		}
		for _, f := range v2ControlFiles {
			files[dir+f] = ""
		}
		files[dir+"cgroup.procs"] = idLines([]int{tgid})
		files[dir+"cgroup.threads"] = idLines(tids)
		files[dir+"cpuset.cpus.effective"] = "0-63\n"
		files[dir+"cpuset.mems.effective"] = "0-1\n"
		refs = append(refs, ContainerRef{PodUID: uid, QOS: corev1.PodQOSBurstable, ContainerID: "containerd://" + id})
	}
	writeFixtureFiles(b, hostRoot, files)
	return hostRoot, refs
}

// BenchmarkResolveAndList resolves and lists 100 containers × 50 threads per op: what one
// agent pass over a busy node costs without /proc reads.
func BenchmarkResolveAndList(b *testing.B) {
	hostRoot, refs := benchContainers(b, 100, 50)
	r, err := NewResolver(hostRoot, ResolverOptions{CgroupRoot: filepath.Join(hostRoot, "cgroup")})
	if err != nil {
		b.Fatal(err)
	}
	b.Run("resolve+list", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			for _, ref := range refs {
				c, err := r.Resolve(ref)
				if err != nil {
					b.Fatal(err)
				}
				tasks, err := r.ListTIDs(c)
				if err != nil || len(tasks) != 50 {
					b.Fatalf("ListTIDs: %d tasks, %v", len(tasks), err)
				}
			}
		}
	})
	cgs := make([]*Container, len(refs))
	for i, ref := range refs {
		if cgs[i], err = r.Resolve(ref); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("list", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			for _, c := range cgs {
				if _, err := r.ListTIDs(c); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
	b.Run("resolve+list+cpuset", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			for _, ref := range refs {
				c, err := r.Resolve(ref)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := r.ListTIDs(c); err != nil {
					b.Fatal(err)
				}
				if _, err := r.Cpuset(c); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
}

func BenchmarkParseTaskIDs(b *testing.B) {
	tids := make([]int, 50)
	for i := range tids {
		tids[i] = 1000000 + i
	}
	data := []byte(idLines(tids))
	b.ReportAllocs()
	b.SetBytes(int64(len(data)))
	var dst []int
	for b.Loop() {
		var err error
		if dst, err = parseTaskIDs(data, dst[:0]); err != nil {
			b.Fatal(err)
		}
	}
}

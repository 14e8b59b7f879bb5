// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package cgroups

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/numapref/numapref/internal/cpuset"
)

func newFixtureResolver(t testing.TB, hostRoot, cgroupRoot string, opts ResolverOptions) *Resolver {
	t.Helper()
	opts.CgroupRoot = cgroupRoot
	r, err := NewResolver(hostRoot, opts)
	if err != nil {
		t.Fatalf("NewResolver: %v", err)
	}
	return r
}

// fxWantPaths are the container cgroup paths the resolver must find, written out per
// driver, runtime and QoS class.
var fxWantPaths = map[string]string{
	"cgroupfs/containerd/Guaranteed": "/kubepods/pod6f1b7c2e-3d4a-4b5c-8d9e-0a1b2c3d4e5f/" + fxCtrGuaranteed,
	"cgroupfs/containerd/Burstable":  "/kubepods/burstable/pod0a1b2c3d4e5f60718293a4b5c6d7e8f9/" + fxCtrBurstable,
	"cgroupfs/containerd/BestEffort": "/kubepods/besteffort/podc0ffee00-1234-4abc-9def-0123456789ab/" + fxCtrBestEffort,
	"cgroupfs/cri-o/Guaranteed":      "/kubepods/pod6f1b7c2e-3d4a-4b5c-8d9e-0a1b2c3d4e5f/crio-" + fxCtrGuaranteed,
	"cgroupfs/cri-o/Burstable":       "/kubepods/burstable/pod0a1b2c3d4e5f60718293a4b5c6d7e8f9/crio-" + fxCtrBurstable,
	"cgroupfs/cri-o/BestEffort":      "/kubepods/besteffort/podc0ffee00-1234-4abc-9def-0123456789ab/crio-" + fxCtrBestEffort,
	"cgroupfs/docker/Guaranteed":     "/kubepods/pod6f1b7c2e-3d4a-4b5c-8d9e-0a1b2c3d4e5f/" + fxCtrGuaranteed,
	"cgroupfs/docker/Burstable":      "/kubepods/burstable/pod0a1b2c3d4e5f60718293a4b5c6d7e8f9/" + fxCtrBurstable,
	"cgroupfs/docker/BestEffort":     "/kubepods/besteffort/podc0ffee00-1234-4abc-9def-0123456789ab/" + fxCtrBestEffort,
	"systemd/containerd/Guaranteed":  "/kubepods.slice/kubepods-pod6f1b7c2e_3d4a_4b5c_8d9e_0a1b2c3d4e5f.slice/cri-containerd-" + fxCtrGuaranteed + ".scope",
	"systemd/containerd/Burstable":   "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod0a1b2c3d4e5f60718293a4b5c6d7e8f9.slice/cri-containerd-" + fxCtrBurstable + ".scope",
	"systemd/containerd/BestEffort":  "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-podc0ffee00_1234_4abc_9def_0123456789ab.slice/cri-containerd-" + fxCtrBestEffort + ".scope",
	"systemd/cri-o/Guaranteed":       "/kubepods.slice/kubepods-pod6f1b7c2e_3d4a_4b5c_8d9e_0a1b2c3d4e5f.slice/crio-" + fxCtrGuaranteed + ".scope",
	"systemd/cri-o/Burstable":        "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod0a1b2c3d4e5f60718293a4b5c6d7e8f9.slice/crio-" + fxCtrBurstable + ".scope",
	"systemd/cri-o/BestEffort":       "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-podc0ffee00_1234_4abc_9def_0123456789ab.slice/crio-" + fxCtrBestEffort + ".scope",
	"systemd/docker/Guaranteed":      "/kubepods.slice/kubepods-pod6f1b7c2e_3d4a_4b5c_8d9e_0a1b2c3d4e5f.slice/docker-" + fxCtrGuaranteed + ".scope",
	"systemd/docker/Burstable":       "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod0a1b2c3d4e5f60718293a4b5c6d7e8f9.slice/docker-" + fxCtrBurstable + ".scope",
	"systemd/docker/BestEffort":      "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-podc0ffee00_1234_4abc_9def_0123456789ab.slice/docker-" + fxCtrBestEffort + ".scope",
}

type fxContainer struct {
	qos    corev1.PodQOSClass
	uid    string
	id     string
	tasks  []TaskRef
	cpuset cpuset.Cpuset // Dir relative to the container's cpuset dir
}

func taskRefs(tgid int, tids ...int) []TaskRef {
	refs := make([]TaskRef, len(tids))
	for i, tid := range tids {
		refs[i] = TaskRef{TGID: tgid, TID: tid}
	}
	return refs
}

var fxContainers = []fxContainer{
	{
		qos: corev1.PodQOSGuaranteed, uid: fxUIDGuaranteed, id: fxCtrGuaranteed,
		tasks:  append(taskRefs(200, 200, 201, 202), taskRefs(210, 210, 211)...),
		cpuset: cpuset.Cpuset{CPUs: []int{2, 3}, Mems: []int{1}},
	},
	{
		qos: corev1.PodQOSBurstable, uid: fxUIDBurstable, id: fxCtrBurstable,
		tasks:  append(append(taskRefs(400, 400, 401, 402), taskRefs(410, 410, 411, 412)...), taskRefs(420, 420)...),
		cpuset: cpuset.Cpuset{CPUs: []int{0, 1, 4, 5, 6, 7}, Mems: []int{0, 1}},
	},
	{
		qos: corev1.PodQOSBestEffort, uid: fxUIDBestEffort, id: fxCtrBestEffort,
		tasks:  taskRefs(600, 600, 601, 602, 603, 604, 605, 606, 607, 608, 609),
		cpuset: cpuset.Cpuset{CPUs: []int{0, 1, 2, 3, 4, 5, 6, 7}, Mems: []int{0, 1}},
	},
}

// TestResolveFixtures resolves, lists and reads the cpuset of every fixture container in
// all 12 version × driver × runtime trees, probing the layout.
func TestResolveFixtures(t *testing.T) {
	for _, combo := range fixtureCombos() {
		r := newFixtureResolver(t, fixtureHost, combo.root(), ResolverOptions{})
		tasksHierarchy := map[string]string{DriverCgroupfs: "pids", DriverSystemd: "systemd"}[combo.driver]
		wantLayout := Layout{
			Version: combo.version, VersionSource: SourceProbe,
			Driver: combo.driver, DriverSource: SourceProbe,
			Root: combo.root(),
		}
		if combo.version == 1 {
			wantLayout.TaskHierarchies = []string{tasksHierarchy, "cpuset"}
			wantLayout.CpusetHierarchy = "cpuset"
		}
		if diff := cmp.Diff(wantLayout, r.Layout()); diff != "" {
			t.Errorf("%s: Layout (-want +got):\n%s", combo, diff)
		}
		for _, fc := range fxContainers {
			t.Run(combo.String()+"/"+string(fc.qos), func(t *testing.T) {
				ref := ContainerRef{PodUID: fc.uid, QOS: fc.qos, ContainerID: combo.runtime + "://" + fc.id}
				path := fxWantPaths[combo.driver+"/"+combo.runtime+"/"+string(fc.qos)]
				want := &Container{
					Ref: ref, Runtime: combo.runtime, ID: fc.id, Path: path,
					TasksDir: filepath.Join(combo.root(), path), CpusetDir: filepath.Join(combo.root(), path),
				}
				if combo.version == 1 {
					want.TasksDir = filepath.Join(combo.root(), tasksHierarchy, path)
					want.CpusetDir = filepath.Join(combo.root(), "cpuset", path)
				}
				got, err := r.Resolve(ref)
				if err != nil {
					t.Fatalf("Resolve: %v", err)
				}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("Resolve (-want +got):\n%s", diff)
				}

				tasks, err := r.ListTIDs(got)
				if err != nil {
					t.Fatalf("ListTIDs: %v", err)
				}
				if diff := cmp.Diff(fc.tasks, tasks); diff != "" {
					t.Errorf("ListTIDs (-want +got):\n%s", diff)
				}
				var wantTIDs []int
				for _, task := range fc.tasks {
					wantTIDs = append(wantTIDs, task.TID)
				}
				tids, err := r.ThreadIDs(got)
				if err != nil {
					t.Fatalf("ThreadIDs: %v", err)
				}
				if diff := cmp.Diff(wantTIDs, tids); diff != "" {
					t.Errorf("ThreadIDs (-want +got):\n%s", diff)
				}

				wantCpuset := fc.cpuset
				wantCpuset.Dir = want.CpusetDir
				if combo == (fixtureCombo{2, DriverCgroupfs, RuntimeDocker}) && fc.qos == corev1.PodQOSBestEffort {
					wantCpuset.Dir = filepath.Dir(want.CpusetDir) // no cpuset files: the pod's
				}
				cs, err := r.Cpuset(got)
				if err != nil {
					t.Fatalf("Cpuset: %v", err)
				}
				if diff := cmp.Diff(wantCpuset, cs); diff != "" {
					t.Errorf("Cpuset (-want +got):\n%s", diff)
				}
			})
		}
	}
}

// TestResolveRefForms resolves the same containers through the other accepted reference
// forms: unknown QoS class, bare container id, runtime-reported cgroups paths.
func TestResolveRefForms(t *testing.T) {
	systemdCrio := fixtureCombo{1, DriverSystemd, RuntimeCRIO}
	cgroupfsContainerd := fixtureCombo{2, DriverCgroupfs, RuntimeContainerd}
	systemdContainerd := fixtureCombo{2, DriverSystemd, RuntimeContainerd}
	tests := map[string]struct {
		combo    fixtureCombo
		ref      ContainerRef
		wantPath string
	}{
		"qos unknown, systemd": {
			combo:    systemdCrio,
			ref:      ContainerRef{PodUID: fxUIDBestEffort, ContainerID: "cri-o://" + fxCtrBestEffort},
			wantPath: fxWantPaths["systemd/cri-o/BestEffort"],
		},
		"qos unknown, cgroupfs": {
			combo:    cgroupfsContainerd,
			ref:      ContainerRef{PodUID: fxUIDBurstable, ContainerID: "containerd://" + fxCtrBurstable},
			wantPath: fxWantPaths["cgroupfs/containerd/Burstable"],
		},
		"bare id, systemd crio": {
			combo:    systemdCrio,
			ref:      ContainerRef{PodUID: fxUIDGuaranteed, QOS: corev1.PodQOSGuaranteed, ContainerID: fxCtrGuaranteed},
			wantPath: fxWantPaths["systemd/cri-o/Guaranteed"],
		},
		"bare id, cgroupfs crio": {
			combo:    fixtureCombo{2, DriverCgroupfs, RuntimeCRIO},
			ref:      ContainerRef{PodUID: fxUIDGuaranteed, ContainerID: fxCtrGuaranteed},
			wantPath: fxWantPaths["cgroupfs/cri-o/Guaranteed"],
		},
		"systemd cgroups path": {
			combo: systemdContainerd,
			ref: ContainerRef{CgroupsPath: "kubepods-besteffort-podc0ffee00_1234_4abc_9def_0123456789ab.slice:cri-containerd:" +
				fxCtrBestEffort},
			wantPath: fxWantPaths["systemd/containerd/BestEffort"],
		},
		"systemd cgroups path, guaranteed": {
			combo: systemdContainerd,
			ref: ContainerRef{CgroupsPath: "kubepods-pod6f1b7c2e_3d4a_4b5c_8d9e_0a1b2c3d4e5f.slice:cri-containerd:" +
				fxCtrGuaranteed, ContainerID: "containerd://" + fxCtrGuaranteed},
			wantPath: fxWantPaths["systemd/containerd/Guaranteed"],
		},
		"cgroupfs cgroups path": {
			combo:    cgroupfsContainerd,
			ref:      ContainerRef{CgroupsPath: "/kubepods/burstable/pod" + fxUIDBurstable + "/" + fxCtrBurstable},
			wantPath: fxWantPaths["cgroupfs/containerd/Burstable"],
		},
		"proc cgroup line": {
			combo:    fixtureCombo{1, DriverCgroupfs, RuntimeDocker},
			ref:      ContainerRef{CgroupsPath: "0::/kubepods/burstable/pod" + fxUIDBurstable + "/" + fxCtrBurstable},
			wantPath: fxWantPaths["cgroupfs/docker/Burstable"],
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			r := newFixtureResolver(t, fixtureHost, tc.combo.root(), ResolverOptions{})
			got, err := r.Resolve(tc.ref)
			if err != nil {
				t.Fatalf("Resolve: %v", err)
			}
			if diff := cmp.Diff(tc.wantPath, got.Path); diff != "" {
				t.Errorf("Path (-want +got):\n%s", diff)
			}
		})
	}
}

func TestResolveErrors(t *testing.T) {
	combo := fixtureCombo{2, DriverSystemd, RuntimeCRIO}
	tests := map[string]struct {
		ref     ContainerRef
		wantErr error
		wantMsg string
	}{
		"exited container": {
			ref:     ContainerRef{PodUID: fxUIDBestEffort, QOS: corev1.PodQOSBestEffort, ContainerID: "cri-o://" + fxExitedID},
			wantErr: ErrContainerNotFound,
			wantMsg: "crio-" + fxExitedID + ".scope",
		},
		"wrong qos class": {
			ref:     ContainerRef{PodUID: fxUIDGuaranteed, QOS: corev1.PodQOSBurstable, ContainerID: "cri-o://" + fxCtrGuaranteed},
			wantErr: ErrContainerNotFound,
		},
		"wrong runtime": {
			ref:     ContainerRef{PodUID: fxUIDGuaranteed, QOS: corev1.PodQOSGuaranteed, ContainerID: "docker://" + fxCtrGuaranteed},
			wantErr: ErrContainerNotFound,
			wantMsg: "docker-" + fxCtrGuaranteed + ".scope",
		},
		"unknown pod": {
			ref:     ContainerRef{PodUID: "00000000-0000-0000-0000-000000000000", ContainerID: "cri-o://" + fxCtrGuaranteed},
			wantErr: ErrContainerNotFound,
		},
		"short container id": {
			ref:     ContainerRef{PodUID: fxUIDGuaranteed, ContainerID: "cri-o://abc123"},
			wantErr: ErrInvalidContainerRef,
			wantMsg: `"cri-o://abc123"`,
		},
		"unknown runtime": {
			ref:     ContainerRef{PodUID: fxUIDGuaranteed, ContainerID: "rkt://" + fxCtrGuaranteed},
			wantErr: ErrInvalidContainerRef,
			wantMsg: "unsupported runtime",
		},
		"path traversal in id": {
			ref:     ContainerRef{PodUID: fxUIDGuaranteed, ContainerID: "containerd://../../../../etc"},
			wantErr: ErrInvalidContainerRef,
		},
		"path traversal in pod uid": {
			ref:     ContainerRef{PodUID: "../x", ContainerID: "containerd://" + fxCtrGuaranteed},
			wantErr: ErrInvalidContainerRef,
		},
		"path traversal in cgroups path": {
			ref:     ContainerRef{CgroupsPath: "/kubepods/../../etc"},
			wantErr: ErrInvalidContainerRef,
		},
		"bad qos": {
			ref:     ContainerRef{PodUID: fxUIDGuaranteed, QOS: "Platinum", ContainerID: "containerd://" + fxCtrGuaranteed},
			wantErr: ErrInvalidContainerRef,
		},
		"nothing": {
			ref:     ContainerRef{PodUID: fxUIDGuaranteed},
			wantErr: ErrInvalidContainerRef,
		},
	}
	r := newFixtureResolver(t, fixtureHost, combo.root(), ResolverOptions{})
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := r.Resolve(tc.ref)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("Resolve = %+v, %v; want error %v", got, err, tc.wantErr)
			}
			if !strings.Contains(err.Error(), tc.wantMsg) {
				t.Errorf("error %q does not mention %q", err, tc.wantMsg)
			}
		})
	}
}

func TestNewResolverLayout(t *testing.T) {
	v1 := fixtureCombo{1, DriverCgroupfs, RuntimeContainerd}
	v2 := fixtureCombo{2, DriverSystemd, RuntimeDocker}
	empty := t.TempDir()
	tests := map[string]struct {
		cgroupRoot string
		opts       ResolverOptions
		want       Layout
		wantErr    error
	}{
		"forced": {
			cgroupRoot: v2.root(),
			opts:       ResolverOptions{Version: 2, Driver: DriverCgroupfs},
			want: Layout{Version: 2, VersionSource: SourceOption, Driver: DriverCgroupfs,
				DriverSource: SourceOption, Root: v2.root()},
		},
		"forced v1 probes hierarchies": {
			cgroupRoot: v1.root(),
			opts:       ResolverOptions{Version: 1},
			want: Layout{Version: 1, VersionSource: SourceOption, Driver: DriverCgroupfs,
				DriverSource: SourceProbe, Root: v1.root(), TaskHierarchies: []string{"pids", "cpuset"},
				CpusetHierarchy: "cpuset"},
		},
		"no kubepods": {
			cgroupRoot: filepath.Join(v1.root(), "unified"),
			wantErr:    ErrUnknownLayout,
		},
		"no cgroups": {
			cgroupRoot: empty,
			wantErr:    ErrUnknownLayout,
		},
		"bad version": {
			cgroupRoot: v2.root(),
			opts:       ResolverOptions{Version: 3},
			wantErr:    ErrUnknownLayout,
		},
		"bad driver": {
			cgroupRoot: v2.root(),
			opts:       ResolverOptions{Driver: "cgroups"},
			wantErr:    ErrUnknownLayout,
		},
		"bad kubelet cgroup root": {
			cgroupRoot: v2.root(),
			opts:       ResolverOptions{KubeletCgroupRoot: "/../x"},
			wantErr:    ErrUnknownLayout,
		},
		"missing root": {
			cgroupRoot: filepath.Join(empty, "nope"),
			wantErr:    os.ErrNotExist,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			tc.opts.CgroupRoot = tc.cgroupRoot
			r, err := NewResolver(fixtureHost, tc.opts)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("NewResolver error = %v, want %v", err, tc.wantErr)
			}
			if err != nil {
				return
			}
			if diff := cmp.Diff(tc.want, r.Layout()); diff != "" {
				t.Errorf("Layout (-want +got):\n%s", diff)
			}
		})
	}
}

func TestNewResolverDefaults(t *testing.T) {
	tests := map[string]struct {
		hostRoot     string
		wantProc     string
		wantRootPath string
	}{
		"own root": {hostRoot: "", wantProc: "/proc", wantRootPath: "/sys/fs/cgroup"},
		"slash":    {hostRoot: "/", wantProc: "/proc", wantRootPath: "/sys/fs/cgroup"},
		"host":     {hostRoot: "/host", wantProc: "/host/proc", wantRootPath: "/host/sys/fs/cgroup"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			// Force version and driver so nothing needs to exist but the root.
			r, err := NewResolver(tc.hostRoot, ResolverOptions{Version: 2, Driver: DriverSystemd})
			if tc.hostRoot == "/host" {
				if !errors.Is(err, os.ErrNotExist) {
					t.Fatalf("NewResolver(/host) error = %v, want not exist", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("NewResolver: %v", err)
			}
			got := []string{r.ProcRoot(), r.Layout().Root}
			if diff := cmp.Diff([]string{tc.wantProc, tc.wantRootPath}, got); diff != "" {
				t.Errorf("roots (-want +got):\n%s", diff)
			}
		})
	}
}

// TestKubeletCgroupRoot checks a non-default kubelet cgroupRoot, as kind uses ("/kubelet"
// with the systemd driver gives kubelet.slice/kubelet-kubepods.slice/...).
func TestKubeletCgroupRoot(t *testing.T) {
	id := fxCtrBurstable
	tests := map[string]struct {
		driver   string
		root     string
		dir      string
		wantPath string
	}{
		"systemd": {
			driver: DriverSystemd, root: "/kubelet",
			dir: "kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-burstable.slice/" +
				"kubelet-kubepods-burstable-pod1234_5678.slice/cri-containerd-" + id + ".scope",
			wantPath: "/kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-burstable.slice/" +
				"kubelet-kubepods-burstable-pod1234_5678.slice/cri-containerd-" + id + ".scope",
		},
		"systemd, dashed root": {
			driver: DriverSystemd, root: "/my-node",
			dir:      "my_node.slice/my_node-kubepods.slice/my_node-kubepods-burstable.slice/my_node-kubepods-burstable-pod1234_5678.slice/cri-containerd-" + id + ".scope",
			wantPath: "/my_node.slice/my_node-kubepods.slice/my_node-kubepods-burstable.slice/my_node-kubepods-burstable-pod1234_5678.slice/cri-containerd-" + id + ".scope",
		},
		"cgroupfs": {
			driver: DriverCgroupfs, root: "test/nested",
			dir:      "test/nested/kubepods/burstable/pod1234-5678/" + id,
			wantPath: "/test/nested/kubepods/burstable/pod1234-5678/" + id,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			root := t.TempDir()
			writeFixtureFiles(t, root, map[string]string{
				"cgroup.controllers":           "",
				tc.dir + "/cgroup.procs":       "7\n",
				tc.dir + "/cgroup.threads":     "7\n8\n",
				tc.dir + "/cgroup.controllers": "",
			})
			r := newFixtureResolver(t, root, root, ResolverOptions{KubeletCgroupRoot: tc.root})
			if got := r.Layout().Driver; got != tc.driver {
				t.Errorf("probed driver %q, want %q", got, tc.driver)
			}
			c, err := r.Resolve(ContainerRef{PodUID: "1234-5678", QOS: corev1.PodQOSBurstable, ContainerID: "containerd://" + id})
			if err != nil {
				t.Fatalf("Resolve: %v", err)
			}
			if diff := cmp.Diff(tc.wantPath, c.Path); diff != "" {
				t.Errorf("Path (-want +got):\n%s", diff)
			}
			tasks, err := r.ListTIDs(c)
			if err != nil {
				t.Fatalf("ListTIDs: %v", err)
			}
			if diff := cmp.Diff(taskRefs(7, 7, 8), tasks); diff != "" {
				t.Errorf("ListTIDs (-want +got):\n%s", diff)
			}
			cs, err := r.Cpuset(c)
			if err != nil {
				t.Fatalf("Cpuset: %v", err)
			}
			if diff := cmp.Diff(cpuset.Cpuset{ControllerMissing: true}, cs); diff != "" {
				t.Errorf("Cpuset (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDriverProbeAmbiguous(t *testing.T) {
	root := t.TempDir()
	writeFixtureFiles(t, root, map[string]string{
		"cgroup.controllers":          "",
		"kubepods/cgroup.procs":       "",
		"kubepods.slice/cgroup.procs": "",
	})
	_, err := NewResolver(root, ResolverOptions{CgroupRoot: root})
	if !errors.Is(err, ErrUnknownLayout) || !strings.Contains(err.Error(), "both") {
		t.Fatalf("NewResolver error = %v, want ErrUnknownLayout naming both", err)
	}
	r, err := NewResolver(root, ResolverOptions{CgroupRoot: root, Driver: DriverSystemd})
	if err != nil {
		t.Fatalf("NewResolver with driver option: %v", err)
	}
	if got := r.Layout().Driver; got != DriverSystemd {
		t.Errorf("driver %q, want systemd", got)
	}
}

// TestV1HierarchyFallback: a v1 host with neither pids nor name=systemd mounted lists tasks
// from the next hierarchy that holds the container, and a host without cpuset reports the
// controller missing.
func TestV1HierarchyFallback(t *testing.T) {
	root := t.TempDir()
	dir := "kubepods/besteffort/podabc/" + fxCtrBestEffort
	writeFixtureFiles(t, root, map[string]string{
		"memory/tasks":                     "1\n",
		"memory/" + dir + "/tasks":         "",
		"freezer/tasks":                    "1\n",
		"freezer/kubepods/tasks":           "",
		"freezer/" + dir + "/tasks":        "5\n6\n",
		"freezer/" + dir + "/cgroup.procs": "5\n",
	})
	r := newFixtureResolver(t, root, root, ResolverOptions{})
	want := Layout{Version: 1, VersionSource: SourceProbe, Driver: DriverCgroupfs, DriverSource: SourceProbe,
		Root: root, TaskHierarchies: []string{"freezer", "memory"}}
	if diff := cmp.Diff(want, r.Layout()); diff != "" {
		t.Errorf("Layout (-want +got):\n%s", diff)
	}
	c, err := r.Resolve(ContainerRef{PodUID: "abc", QOS: corev1.PodQOSBestEffort, ContainerID: "containerd://" + fxCtrBestEffort})
	if err != nil {
		t.Fatalf("Resolve: %v", err)
	}
	if got, want := c.TasksDir, filepath.Join(root, "freezer", dir); got != want {
		t.Errorf("TasksDir = %s, want %s", got, want)
	}
	tasks, err := r.ListTIDs(c)
	if err != nil {
		t.Fatalf("ListTIDs: %v", err)
	}
	if diff := cmp.Diff(taskRefs(5, 5, 6), tasks); diff != "" {
		t.Errorf("ListTIDs (-want +got):\n%s", diff)
	}
	cs, err := r.Cpuset(c)
	if err != nil {
		t.Fatalf("Cpuset: %v", err)
	}
	if diff := cmp.Diff(cpuset.Cpuset{ControllerMissing: true}, cs); diff != "" {
		t.Errorf("Cpuset (-want +got):\n%s", diff)
	}
}

func TestCpusetV1OldKernel(t *testing.T) {
	root := t.TempDir()
	dir := "kubepods/podabc/" + fxCtrGuaranteed
	writeFixtureFiles(t, root, map[string]string{
		"cpuset/tasks":                   "1\n",
		"cpuset/" + dir + "/tasks":       "",
		"cpuset/" + dir + "/cpuset.cpus": "3\n",
		"cpuset/" + dir + "/cpuset.mems": "0\n",
	})
	r := newFixtureResolver(t, root, root, ResolverOptions{})
	c, err := r.Resolve(ContainerRef{PodUID: "abc", QOS: corev1.PodQOSGuaranteed, ContainerID: "docker://" + fxCtrGuaranteed})
	if err != nil {
		t.Fatalf("Resolve: %v", err)
	}
	cs, err := r.Cpuset(c)
	if err != nil {
		t.Fatalf("Cpuset: %v", err)
	}
	want := cpuset.Cpuset{CPUs: []int{3}, Mems: []int{0}, Dir: filepath.Join(root, "cpuset", dir)}
	if diff := cmp.Diff(want, cs); diff != "" {
		t.Errorf("Cpuset (-want +got):\n%s", diff)
	}
	if err := os.RemoveAll(filepath.Join(root, "cpuset", dir)); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Cpuset(c); !errors.Is(err, ErrContainerNotFound) {
		t.Errorf("Cpuset after removal: %v, want ErrContainerNotFound", err)
	}
}

func TestCpusetMalformed(t *testing.T) {
	root := t.TempDir()
	dir := "kubepods/podabc/" + fxCtrGuaranteed
	writeFixtureFiles(t, root, map[string]string{
		"cgroup.controllers":           "cpuset\n",
		dir + "/cgroup.procs":          "",
		dir + "/cpuset.cpus.effective": "0-x\n",
		dir + "/cpuset.mems.effective": "0\n",
	})
	r := newFixtureResolver(t, root, root, ResolverOptions{})
	c, err := r.Resolve(ContainerRef{PodUID: "abc", QOS: corev1.PodQOSGuaranteed, ContainerID: "docker://" + fxCtrGuaranteed})
	if err != nil {
		t.Fatalf("Resolve: %v", err)
	}
	if _, err := r.Cpuset(c); err == nil || !strings.Contains(err.Error(), "cpuset.cpus.effective") {
		t.Errorf("Cpuset error = %v, want one naming cpuset.cpus.effective", err)
	}
}

// mirrorPodAPIUID is the metadata.uid of mirrorPod's pods.
const mirrorPodAPIUID = "11111111-2222-3333-4444-555555555555"

// mirrorPod is a pod on node with the kubelet's mirror annotations and owners.
func mirrorPod(node string, owners ...metav1.OwnerReference) corev1.Pod {
	return corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{UID: mirrorPodAPIUID, OwnerReferences: owners, Annotations: map[string]string{
			"kubernetes.io/config.mirror": fxUIDBurstable,
			"kubernetes.io/config.hash":   fxUIDBurstable,
		}},
		Spec: corev1.PodSpec{NodeName: node},
	}
}

func TestNewResolverPIDNamespace(t *testing.T) {
	tests := map[string]struct {
		self    string // target of <hostRoot>/proc/self; "" for none
		wantErr error
	}{
		"same namespace":  {self: strconv.Itoa(os.Getpid())},
		"other namespace": {self: "4194304", wantErr: ErrForeignPIDNamespace},
		"no self link":    {},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			host := t.TempDir()
			writeFixtureFiles(t, host, map[string]string{"cgroup/cgroup.controllers": "", "cgroup/kubepods/cgroup.procs": ""})
			if tc.self != "" {
				if err := os.MkdirAll(filepath.Join(host, "proc"), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.Symlink(tc.self, filepath.Join(host, "proc", "self")); err != nil {
					t.Fatal(err)
				}
			}
			_, err := NewResolver(host, ResolverOptions{CgroupRoot: filepath.Join(host, "cgroup")})
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("NewResolver error = %v, want %v", err, tc.wantErr)
			}
		})
	}
}

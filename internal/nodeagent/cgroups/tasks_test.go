// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package cgroups

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/numapref/numapref/internal/numa"
)

func fxRef(combo fixtureCombo, fc fxContainer) ContainerRef {
	return ContainerRef{PodUID: fc.uid, QOS: fc.qos, ContainerID: combo.runtime + "://" + fc.id}
}

// fxBurstable is the fixture container with nested sub-cgroups.
var fxBurstable = fxContainers[1]

// TestListTIDsVanishingCgroup removes cgroups while ListTIDs walks them.
func TestListTIDsVanishingCgroup(t *testing.T) {
	tests := map[string]struct {
		combo fixtureCombo
		// when is the sub-cgroup whose visit triggers the removal; remove is what goes:
		// that sub-cgroup, or "container" for the container's whole directory.
		when, remove string
		want         []TaskRef
		wantErr      error
	}{
		"v1 sub-cgroup vanishes": {
			combo: fixtureCombo{1, DriverCgroupfs, RuntimeContainerd},
			when:  "nested", remove: "nested",
			want: taskRefs(400, 400, 401), // 402 sits in nested/deeper on v1
		},
		"v2 deepest sub-cgroup vanishes": {
			combo: fixtureCombo{2, DriverSystemd, RuntimeCRIO},
			when:  "deeper", remove: "deeper",
			want: append(taskRefs(400, 400, 401, 402), taskRefs(410, 410, 411, 412)...),
		},
		"container vanishes mid-walk": {
			combo: fixtureCombo{2, DriverCgroupfs, RuntimeDocker},
			when:  "nested", remove: "container",
			wantErr: ErrContainerNotFound,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			hostRoot, cgroupRoot := copyFixture(t, tc.combo)
			r := newFixtureResolver(t, hostRoot, cgroupRoot, ResolverOptions{})
			c, err := r.Resolve(fxRef(tc.combo, fxBurstable))
			if err != nil {
				t.Fatalf("Resolve: %v", err)
			}
			r.walkHook = func(sub string) {
				if filepath.Base(sub) != tc.when {
					return
				}
				dir := sub
				if tc.remove == "container" {
					dir = c.TasksDir
				}
				if err := os.RemoveAll(dir); err != nil {
					t.Fatal(err)
				}
			}
			got, err := r.ListTIDs(c)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("ListTIDs error = %v, want %v", err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("ListTIDs (-want +got):\n%s", diff)
			}
		})
	}
}

// TestContainerExited: a container whose cgroup went away after Resolve, and a CRI-O
// container gone while its conmon cgroup lingers.
func TestContainerExited(t *testing.T) {
	for _, combo := range []fixtureCombo{{1, DriverSystemd, RuntimeCRIO}, {2, DriverCgroupfs, RuntimeCRIO}} {
		t.Run(combo.String(), func(t *testing.T) {
			hostRoot, cgroupRoot := copyFixture(t, combo)
			r := newFixtureResolver(t, hostRoot, cgroupRoot, ResolverOptions{})
			ref := fxRef(combo, fxContainers[2])
			c, err := r.Resolve(ref)
			if err != nil {
				t.Fatalf("Resolve: %v", err)
			}
			for _, dir := range []string{c.TasksDir, c.CpusetDir} {
				if err := os.RemoveAll(dir); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := r.ListTIDs(c); !errors.Is(err, ErrContainerNotFound) {
				t.Errorf("ListTIDs error = %v, want ErrContainerNotFound", err)
			}
			if _, err := r.ThreadIDs(c); !errors.Is(err, ErrContainerNotFound) {
				t.Errorf("ThreadIDs error = %v, want ErrContainerNotFound", err)
			}
			if _, err := r.Cpuset(c); !errors.Is(err, ErrContainerNotFound) {
				t.Errorf("Cpuset error = %v, want ErrContainerNotFound", err)
			}
			if _, err := DescribeContainer(r, ref); !errors.Is(err, ErrContainerNotFound) {
				t.Errorf("DescribeContainer error = %v, want ErrContainerNotFound", err)
			}
			// The conmon sibling is still there and must not be taken for the container.
			conmon := filepath.Join(filepath.Dir(c.TasksDir), combo.conmonLeaf(fxCtrBestEffort))
			if !dirExists(conmon) {
				t.Fatalf("fixture lacks %s", conmon)
			}
			if got, err := r.Resolve(ref); !errors.Is(err, ErrContainerNotFound) {
				t.Errorf("Resolve = %+v, %v; want ErrContainerNotFound", got, err)
			}
		})
	}
}

// TestListTIDsThreadOwners covers how threads are given their process when a cgroup holds
// several processes.
func TestListTIDsThreadOwners(t *testing.T) {
	const dir = "kubepods/podabc/" + "cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc"
	tests := map[string]struct {
		files   map[string]string
		want    []TaskRef
		wantErr error
	}{
		"owners from task dirs": {
			files: map[string]string{
				dir + "/cgroup.threads": "11\n12\n21\n22\n",
				dir + "/cgroup.procs":   "21\n11\n",
				"proc/11/task/11/stat":  "", "proc/11/task/12/stat": "",
				"proc/21/task/21/stat": "", "proc/21/task/22/stat": "",
			},
			want: []TaskRef{{11, 11}, {11, 12}, {21, 21}, {21, 22}},
		},
		"process exited between reads": {
			files: map[string]string{
				dir + "/cgroup.threads": "11\n12\n21\n22\n",
				dir + "/cgroup.procs":   "21\n11\n",
				"proc/11/task/11/stat":  "", "proc/11/task/12/stat": "",
			},
			want: []TaskRef{{11, 11}, {11, 12}, {21, 21}},
		},
		"owner found through status": {
			files: map[string]string{
				dir + "/cgroup.threads": "11\n31\n21\n",
				dir + "/cgroup.procs":   "21\n11\n",
				"proc/11/task/11/stat":  "", "proc/21/task/21/stat": "",
				"proc/31/status": "Name:\tx\nTgid:\t30\nPid:\t31\n",
			},
			want: []TaskRef{{11, 11}, {21, 21}, {30, 31}},
		},
		"pid namespace mismatch": {
			files: map[string]string{
				dir + "/cgroup.threads": "0\n0\n7\n",
				dir + "/cgroup.procs":   "0\n7\n",
			},
			wantErr: ErrForeignPIDNamespace,
		},
		"malformed threads file": {
			files: map[string]string{
				dir + "/cgroup.threads": "11\nbanana\n",
				dir + "/cgroup.procs":   "11\n",
			},
			wantErr: errParse,
		},
		"empty container": {
			files: map[string]string{
				dir + "/cgroup.threads": "",
				dir + "/cgroup.procs":   "",
			},
			want: []TaskRef{},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			host := t.TempDir()
			files := map[string]string{"cgroup/cgroup.controllers": ""}
			for name, content := range tc.files {
				if !strings.HasPrefix(name, "proc/") {
					name = "cgroup/" + name
				}
				files[name] = content
			}
			writeFixtureFiles(t, host, files)
			r := newFixtureResolver(t, host, filepath.Join(host, "cgroup"), ResolverOptions{})
			c, err := r.Resolve(ContainerRef{PodUID: "abc", QOS: corev1.PodQOSGuaranteed, ContainerID: "containerd://" + filepath.Base(dir)})
			if err != nil {
				t.Fatalf("Resolve: %v", err)
			}
			got, err := r.ListTIDs(c)
			if tc.wantErr == errParse {
				if err == nil || !strings.Contains(err.Error(), "banana") {
					t.Fatalf("ListTIDs error = %v, want a parse error", err)
				}
				return
			}
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("ListTIDs error = %v, want %v", err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("ListTIDs (-want +got):\n%s", diff)
			}
		})
	}
}

var errParse = errors.New("parse error")

func TestParseTaskIDs(t *testing.T) {
	tests := map[string]struct {
		in      string
		want    []int
		wantErr bool
	}{
		"empty":             {in: "", want: nil},
		"one":               {in: "42\n", want: []int{42}},
		"no final newline":  {in: "1\n2", want: []int{1, 2}},
		"unsorted and zero": {in: "9\n0\n3\n", want: []int{9, 0, 3}},
		"max":               {in: "2147483647\n", want: []int{2147483647}},
		"too big":           {in: "2147483648\n", wantErr: true},
		"too long":          {in: "99999999999\n", wantErr: true},
		"blank line":        {in: "1\n\n2\n", wantErr: true},
		"space":             {in: " 1\n", wantErr: true},
		"sign":              {in: "-1\n", wantErr: true},
		"crlf":              {in: "1\r\n", wantErr: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := parseTaskIDs([]byte(tc.in), nil)
			if (err != nil) != tc.wantErr {
				t.Fatalf("parseTaskIDs(%q) error = %v, wantErr %v", tc.in, err, tc.wantErr)
			}
			if tc.wantErr {
				return
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("parseTaskIDs(%q) (-want +got):\n%s", tc.in, diff)
			}
		})
	}
}

// TestIdentifyAndVerify pins fixture tasks to their start times and checks that a task
// id reused by another task (a changed start time) or gone is not the same task.
func TestIdentifyAndVerify(t *testing.T) {
	combo := fixtureCombo{1, DriverSystemd, RuntimeDocker}
	hostRoot, cgroupRoot := copyFixture(t, combo)
	r := newFixtureResolver(t, hostRoot, cgroupRoot, ResolverOptions{})
	c, err := r.Resolve(fxRef(combo, fxBurstable))
	if err != nil {
		t.Fatalf("Resolve: %v", err)
	}
	refs, err := r.ListTIDs(c)
	if err != nil {
		t.Fatalf("ListTIDs: %v", err)
	}
	// Between the identity reads and Identify's second listing, task 411 leaves the
	// container and 420 exits: neither may be returned.
	r.walkHook = func(sub string) {
		if filepath.Base(sub) == "nested" {
			writeFixtureFiles(t, sub, map[string]string{"tasks": "410\n412\n"})
		}
	}
	if err := os.Remove(filepath.Join(hostRoot, "proc", "420", "stat")); err != nil {
		t.Fatal(err)
	}
	got, err := r.Identify(c, refs)
	if err != nil {
		t.Fatalf("Identify: %v", err)
	}
	r.walkHook = nil
	var want []IdentifiedTask
	for _, ref := range refs {
		if ref.TID != 411 && ref.TID != 420 {
			want = append(want, IdentifiedTask{TGID: ref.TGID, Task: numa.Task{TID: ref.TID, StartTime: fixtureStartTime(ref.TID)}})
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Identify (-want +got):\n%s", diff)
	}

	// Task 401 exits and a new task takes its id: same tid, later start time.
	writeFixtureFiles(t, hostRoot, map[string]string{"proc/401/stat": fixtureStat(401, 400, fixtureStartTime(401)+250)})
	tests := map[string]struct {
		task        numa.Task
		wantErr     error
		notReplaced bool
	}{
		"same task":     {task: numa.Task{TID: 400, StartTime: fixtureStartTime(400)}},
		"pid reused":    {task: numa.Task{TID: 401, StartTime: fixtureStartTime(401)}, wantErr: numa.ErrTaskReplaced},
		"task gone":     {task: numa.Task{TID: 420, StartTime: fixtureStartTime(420)}, wantErr: numa.ErrTaskGone, notReplaced: true},
		"never existed": {task: numa.Task{TID: 99999, StartTime: 1}, wantErr: numa.ErrTaskGone, notReplaced: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			err := tc.task.Verify(r.ProcRoot())
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("Verify error = %v, want %v", err, tc.wantErr)
			}
			if tc.wantErr != nil && !errors.Is(err, numa.ErrTaskGone) {
				t.Errorf("Verify error %v does not wrap numa.ErrTaskGone", err)
			}
			if tc.notReplaced && errors.Is(err, numa.ErrTaskReplaced) {
				t.Errorf("Verify error %v claims a replacement", err)
			}
		})
	}
}

func TestDescribeContainerJSON(t *testing.T) {
	combo := fixtureCombo{2, DriverSystemd, RuntimeContainerd}
	r := newFixtureResolver(t, fixtureHost, combo.root(), ResolverOptions{})
	ref := fxRef(combo, fxContainers[0])
	rep, err := DescribeContainer(r, ref)
	if err != nil {
		t.Fatalf("DescribeContainer: %v", err)
	}
	got, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	dir := "testdata/host/cgroup/v2-systemd-containerd" + fxWantPaths["systemd/containerd/Guaranteed"]
	want := `{
  "layout": {
    "version": 2,
    "versionSource": "probe",
    "driver": "systemd",
    "driverSource": "probe",
    "root": "testdata/host/cgroup/v2-systemd-containerd"
  },
  "cgroup": {
    "ref": {
      "podUID": "6f1b7c2e-3d4a-4b5c-8d9e-0a1b2c3d4e5f",
      "qos": "Guaranteed",
      "containerID": "containerd://` + fxCtrGuaranteed + `"
    },
    "runtime": "containerd",
    "id": "` + fxCtrGuaranteed + `",
    "path": "` + fxWantPaths["systemd/containerd/Guaranteed"] + `",
    "tasksDir": "` + dir + `",
    "cpusetDir": "` + dir + `"
  },
  "cpuset": {
    "mems": [
      1
    ],
    "cpus": [
      2,
      3
    ],
    "dir": "` + dir + `"
  },
  "processes": 2,
  "tasks": [
    {
      "tgid": 200,
      "tid": 200,
      "startTime": 100200
    },
    {
      "tgid": 200,
      "tid": 201,
      "startTime": 100201
    },
    {
      "tgid": 200,
      "tid": 202,
      "startTime": 100202
    },
    {
      "tgid": 210,
      "tid": 210,
      "startTime": 100210
    },
    {
      "tgid": 210,
      "tid": 211,
      "startTime": 100211
    }
  ]
}`
	if diff := cmp.Diff(want, string(got)); diff != "" {
		t.Errorf("report JSON (-want +got):\n%s", diff)
	}
}

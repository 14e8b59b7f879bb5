// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
	"github.com/numapref/numapref/internal/inspect"
)

func intp(v int) *int { return &v }

// samplePod is an answer as an agent gives it: an init container that never started, a
// selected container with a task born since the last pass and one whose effective value
// could not be read, and an unselected container whose application forced its own node.
func samplePod() *inspect.Pod {
	return &inspect.Pod{
		APIVersion: inspect.APIVersion, Kind: inspect.Kind, Node: "node-a",
		Namespace: "shop", Name: "db-0", UID: "0f1e2d3c", QOSClass: "Burstable", Selected: true,
		Kernel: inspect.Kernel{Backend: "emulator", Supported: true, Reason: "emulated"},
		Containers: []inspect.Container{
			{Name: "setup", Init: true, Reason: inspect.ReasonNotSelected,
				CgroupError: "the container has not started: no container ID in pod status", Tasks: []inspect.Task{}},
			{Name: "main", ContainerID: "containerd://abc", DesiredNode: intp(1), Source: "NumaPreference/db",
				Reason: "Applied", PlacedAt: "Start", ManagedTasks: 2, Mechanism: "prctl+memoryPolicy", MemoryPolicy: "prefer:1",
				Cgroup: &inspect.Cgroup{Path: "/kubepods/burstable/pod0f1e2d3c/abc", TasksDir: "/sys/fs/cgroup/kubepods/burstable/pod0f1e2d3c/abc"},
				Cpuset: &inspect.Cpuset{Mems: []int{0, 1, 3}, CPUs: []int{0, 1}},
				Tasks: []inspect.Task{
					{TID: 100, TGID: 100, Listed: true, Forced: intp(1), Effective: intp(1)},
					{TID: 101, TGID: 100, Listed: true, Forced: intp(1), EffectiveError: "the task exited"},
					{TID: 107, TGID: 100, Forced: intp(-1), Effective: intp(-1)},
				}},
			{Name: "side", ContainerID: "containerd://def", Reason: inspect.ReasonNotSelected,
				Cgroup: &inspect.Cgroup{Path: "/kubepods/burstable/pod0f1e2d3c/def"},
				Cpuset: &inspect.Cpuset{ControllerMissing: true, Mems: []int{}, CPUs: []int{}},
				Tasks:  []inspect.Task{{TID: 200, TGID: 200, Forced: intp(0), Effective: intp(-1)}}},
			{Name: "pinned", ContainerID: "containerd://fed", DesiredNode: intp(1), Source: "annotation",
				Reason: "MemoryPinnedElsewhere", Message: "cpuset.mems of the container is 0; NUMA node 1 would fight it",
				Cgroup: &inspect.Cgroup{Path: "/kubepods/burstable/pod0f1e2d3c/fed"}, CpusetError: "reading cpuset: gone",
				Tasks: []inspect.Task{{TID: 300, TGID: 300, ForcedError: "operation not permitted", Effective: intp(0)}}},
		},
	}
}

func TestPrintTable(t *testing.T) {
	var out bytes.Buffer
	if err := printTable(&out, samplePod()); err != nil {
		t.Fatal(err)
	}
	want := `Pod:     shop/db-0 (uid 0f1e2d3c, Burstable)
Node:    node-a
Kernel:  emulator

CONTAINER     DESIRED  SOURCE             REASON                 BY                  PLACED  TASKS  CPUSET MEMS                 CGROUP
setup (init)  -        -                  NotSelected            -                   -       0      -                           -
main          1        NumaPreference/db  Applied                prctl+memoryPolicy  Start   2/3    0-1,3                       /kubepods/burstable/pod0f1e2d3c/abc
side          -        -                  NotSelected            -                   -       1      all (no cpuset controller)  /kubepods/burstable/pod0f1e2d3c/def
pinned        1        annotation         MemoryPinnedElsewhere  -                   -       0/1    -                           /kubepods/burstable/pod0f1e2d3c/fed
  setup: cgroup: the container has not started: no container ID in pod status
  main: memory policy prefer:1
  pinned: cpuset.mems of the container is 0; NUMA node 1 would fight it
  pinned: cpuset: reading cpuset: gone

CONTAINER  TID   TGID  FORCED  EFFECTIVE  DESIRED
main       100   100   1       1          1
main       101   100   1       ?          1
main       107*  100   none    none       1
side       200   200   0       none       -
pinned     300   300   ?       0          1
`
	if diff := cmp.Diff(want, out.String()); diff != "" {
		t.Errorf("table (-want +got):\n%s", diff)
	}
}

func TestPrintTableNotSelected(t *testing.T) {
	p := &inspect.Pod{APIVersion: inspect.APIVersion, Kind: inspect.Kind, Node: "node-a", Namespace: "kube-system", Name: "etcd",
		UID: "u1", QOSClass: "Burstable", Kernel: inspect.Kernel{Backend: "prctl", Supported: true},
		Containers: []inspect.Container{{Name: "etcd", Reason: inspect.ReasonNotSelected, Tasks: []inspect.Task{}}}}
	var out bytes.Buffer
	if err := printTable(&out, p); err != nil {
		t.Fatal(err)
	}
	want := `Pod:     kube-system/etcd (uid u1, Burstable)
Node:    node-a
Kernel:  prctl

Not selected: no annotation or NumaPreference asks for a container of this pod, so the agent
does not describe it (no cgroups, tasks or host ids of pods it does not manage).
`
	if diff := cmp.Diff(want, out.String()); diff != "" {
		t.Errorf("table (-want +got):\n%s", diff)
	}
}

func TestPrintTableUnsupportedKernel(t *testing.T) {
	p := samplePod()
	p.Kernel = inspect.Kernel{Backend: "prctl", Reason: "no PR_PREFERRED_NID"}
	p.Containers = nil
	p.Selected = true
	var out bytes.Buffer
	if err := printTable(&out, p); err != nil {
		t.Fatal(err)
	}
	want := "Kernel:  prctl (unsupported: no PR_PREFERRED_NID)\n"
	if !bytes.Contains(out.Bytes(), []byte(want)) {
		t.Errorf("table does not say the kernel is unsupported (want %q):\n%s", want, out.String())
	}
}

// TestPrintJSON checks that -o json is the agent's answer, complete and in the documented
// field names (nulls included: they mean "could not be read").
func TestPrintJSON(t *testing.T) {
	var out bytes.Buffer
	if err := printJSON(&out, samplePod()); err != nil {
		t.Fatal(err)
	}
	var back inspect.Pod
	if err := json.Unmarshal(out.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(samplePod(), &back); diff != "" {
		t.Errorf("JSON round trip (-want +got):\n%s", diff)
	}
	var raw struct {
		APIVersion string `json:"apiVersion"`
		Containers []struct {
			Name        string          `json:"name"`
			DesiredNode json.RawMessage `json:"desiredNode"`
			Cpuset      *struct {
				Mems []int `json:"mems"`
			} `json:"cpuset"`
			Tasks []map[string]json.RawMessage `json:"tasks"`
		} `json:"containers"`
	}
	if err := json.Unmarshal(out.Bytes(), &raw); err != nil {
		t.Fatal(err)
	}
	main := raw.Containers[1]
	if raw.APIVersion != "inspect.numapref.io/v1" || main.Name != "main" || string(main.DesiredNode) != "1" ||
		!cmp.Equal(main.Cpuset.Mems, []int{0, 1, 3}) {
		t.Errorf("unexpected field names or values: %s", out.String())
	}
	if got := string(main.Tasks[1]["effective"]); got != "null" {
		t.Errorf(`an unread effective value is %s, want null`, got)
	}
	if got := string(raw.Containers[2].DesiredNode); got != "null" {
		t.Errorf(`an unselected container's desiredNode is %s, want null`, got)
	}
}

// A FollowDevices container's notes say how its node was chosen and name each device
// followed with its NUMA nodes, a DRA device by its class, claim, driver and pool.
func TestPrintFollowedDevices(t *testing.T) {
	c := inspect.Container{Name: "main", Mode: "FollowDevices", DesiredNode: intp(1),
		Why: "FollowDevices: 2 of 3 devices on node 1, the most of nodes 0-1 (ties to the lowest id)",
		Devices: []inspect.Device{
			{ResourceName: "example.com/gpu", ID: "g0", Nodes: []int{1}},
			{Driver: "nic.example.com", Pool: "node-a", Claim: "shop/nic", DeviceClassName: "nic.example.com", ID: "eth1", Nodes: []int{1}},
			{ResourceName: "example.com/fpga", ID: "f0"},
		}}
	want := []string{
		"  main: FollowDevices: 2 of 3 devices on node 1, the most of nodes 0-1 (ties to the lowest id)",
		"  main: devices followed: example.com/gpu g0 on node 1, nic.example.com eth1 (claim shop/nic, driver nic.example.com, pool node-a) on node 1, " +
			"example.com/fpga f0 on no NUMA node",
	}
	if diff := cmp.Diff(want, containerNotes(c)); diff != "" {
		t.Errorf("notes (-want +got):\n%s", diff)
	}
}

// status's header says what a preference asks, for FollowDevices the devices it follows.
func TestPreferenceTarget(t *testing.T) {
	node := int32(1)
	for name, tc := range map[string]struct {
		spec numav1.NumaPreferenceSpec
		want string
	}{
		"static": {numav1.NumaPreferenceSpec{Mode: numav1.PlacementModeStatic, Node: &node}, "Static, node 1"},
		"every device": {numav1.NumaPreferenceSpec{Mode: numav1.PlacementModeFollowDevices},
			"FollowDevices, following every device"},
		"resources and classes": {numav1.NumaPreferenceSpec{Mode: numav1.PlacementModeFollowDevices, Nodes: []int32{0, 1},
			Devices: &numav1.DeviceSelection{ResourceNames: []string{"example.com/gpu", "example.com/fpga"}, DeviceClassNames: []string{"nic.example.com"}}},
			"FollowDevices, allowed nodes [0 1], following resources example.com/gpu,example.com/fpga and device classes nic.example.com"},
	} {
		t.Run(name, func(t *testing.T) {
			if got := preferenceTarget(tc.spec); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

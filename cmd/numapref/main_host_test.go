// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build host && linux

package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/numapref/numapref/internal/nodeagent/cgroups"
	"github.com/numapref/numapref/internal/numa/prctl"
	"github.com/numapref/numapref/internal/testutil/hostlab"
	"github.com/numapref/numapref/internal/testutil/testenv"
)

// numapref runs the test binary as the numapref binary with args and returns its output.
func numapref(t *testing.T, args ...string) []byte {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "NUMAPREF_RUN_MAIN=1")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("numapref %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// TestProbeCommandOnThisHost probes this machine's kernel, which lacks the preferred-node
// patch (as every host of the host tier does: the patched kernel runs in the kernel lab).
func TestProbeCommandOnThisHost(t *testing.T) {
	var rep prctl.Report
	if err := json.Unmarshal(numapref(t, "probe"), &rep); err != nil {
		t.Fatal(err)
	}
	// This kernel (mainline, no patch) must be reported unsupported, with the reason.
	if rep.Prctl.Supported || !strings.Contains(rep.Prctl.Reason, "numa_preferred_nid_force") {
		t.Errorf("probe prctl = %+v; want unsupported because numa_preferred_nid_force is missing", rep.Prctl)
	}
	if rep.Prctl.Option != prctl.DefaultOption {
		t.Errorf("probe option = %d, want %d", rep.Prctl.Option, prctl.DefaultOption)
	}
	if rep.Topology == nil || len(rep.Topology.Online) == 0 {
		t.Errorf("probe found no online NUMA node: %+v", rep.Topology)
	}
}

func TestTasksCommandOnRealCgroups(t *testing.T) {
	testenv.RequireRoot(t) // makes real cgroups
	lab, err := hostlab.New("/sys/fs/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	defer lab.Close()
	uid := "11111111-2222-3333-4444-555555555555"
	c, err := lab.Container(corev1.PodQOSGuaranteed, uid, strings.Repeat("c0", 32))
	if err != nil {
		t.Fatal(err)
	}
	w, err := c.StartWorkload(3)
	if err != nil {
		t.Fatal(err)
	}
	var rep cgroups.ContainerReport
	out := numapref(t, "tasks", "-pod-uid", uid, "-qos", "Guaranteed", "-container-id", c.ContainerID,
		"-cgroup-driver", "cgroupfs", "-kubelet-cgroup-root", lab.KubeletCgroupRoot())
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var got []int
	for _, task := range rep.Tasks {
		if task.TGID != w.Pid() {
			t.Errorf("task %d has TGID %d, want %d", task.TID, task.TGID, w.Pid())
		}
		got = append(got, task.TID)
	}
	want, err := w.TIDs()
	if err != nil {
		t.Fatal(err)
	}
	// The Go runtime may start a thread between the listing and now: all listed tasks must
	// be the workload's, and the workload's threads at least the 4 we asked for.
	for _, tid := range got {
		if !slices.Contains(want, tid) {
			t.Errorf("listed task %d is not a thread of the workload %v", tid, want)
		}
	}
	if len(got) < 4 {
		t.Errorf("listed %d tasks, want at least 4", len(got))
	}
	if !slices.Equal(rep.Cpuset.Mems, []int{0}) {
		t.Errorf("cpuset mems = %v, want [0] on this one-node host", rep.Cpuset.Mems)
	}
}

// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build host && linux

package nodeagent

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
	"github.com/numapref/numapref/internal/inspect"
	"github.com/numapref/numapref/internal/nodeagent/cgroups"
	"github.com/numapref/numapref/internal/nodeagent/desire"
	"github.com/numapref/numapref/internal/numa"
	"github.com/numapref/numapref/internal/testutil/hostlab"
)

// TestInspectPodOnRealHost runs the endpoint against a real engine on the emulated kernel
// with real processes in real cgroups: a selected container, an unselected one whose
// application set its own value, and an init container that never started.
func TestInspectPodOnRealHost(t *testing.T) {
	el := newEngineLab(t)
	db, dbCgroup, d := el.container(t, "db", 0, 3)
	sideID := strings.Repeat("5e", 32)
	side, err := el.lab.Container(corev1.PodQOSBurstable, d.Ref.PodUID, sideID)
	if err != nil {
		t.Fatal(err)
	}
	sideW, err := side.StartWorkload(2)
	if err != nil {
		t.Fatal(err)
	}
	// The sidecar's application forces node 1 on its main thread itself.
	if err := el.emu.Set(sideW.Pid(), 1); err != nil {
		t.Fatal(err)
	}
	running := corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "db", UID: d.PodUID},
		Spec: corev1.PodSpec{NodeName: "node-a",
			InitContainers: []corev1.Container{{Name: "setup"}},
			Containers:     []corev1.Container{{Name: "main"}, {Name: "side"}}},
		Status: corev1.PodStatus{QOSClass: corev1.PodQOSBurstable,
			InitContainerStatuses: []corev1.ContainerStatus{{Name: "setup"}},
			ContainerStatuses: []corev1.ContainerStatus{
				{Name: "main", ContainerID: dbCgroup.ContainerID, State: running},
				{Name: "side", ContainerID: side.ContainerID, State: running},
			}},
	}

	e := el.engine(t)
	e.SetDesired([]desire.Desire{d})
	el.settle(t, e, db.Pid())
	// Every thread of the pass's listing still runs, so the threads running now include
	// them all; any thread not among them is born after the pass. Start threads until
	// there is one (the Go runtime may run a locked goroutine on an idle thread).
	seen, err := db.TIDs()
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a thread is born after the pass", func() bool {
		if err := db.Threads(2); err != nil {
			t.Fatal(err)
		}
		now, err := db.TIDs()
		return err == nil && len(now) > len(seen)
	})
	h := inspect.NewHandler(NewPodInspector(cgroups.NewNodeIdentity("node-a"), podMap(pod), e), allowAll{})
	// The Go runtime of a workload may start a thread at any time: the answer must hold
	// every thread that ran before the request, and only threads that ran after it.
	before := map[int][]int{}
	for _, pid := range []int{db.Pid(), sideW.Pid()} {
		if before[pid], err = hostlab.TasksOf(pid); err != nil {
			t.Fatal(err)
		}
	}

	rec, body := getInspect(t, h, http.MethodGet, "/inspect/ns/db")
	if rec.Code != http.StatusOK {
		t.Fatalf("GET: status %d: %s", rec.Code, body)
	}
	var got inspect.Pod
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatalf("decoding %s: %v", body, err)
	}

	// Identity, and the containers in spec order (init first) with what the agent wants.
	type containerView struct {
		Name, Reason, Source, PlacedAt string
		Desired                        *int
		Init                           bool
	}
	var views []containerView
	for _, c := range got.Containers {
		views = append(views, containerView{Name: c.Name, Reason: c.Reason, Source: c.Source, PlacedAt: c.PlacedAt, Desired: c.DesiredNode, Init: c.Init})
	}
	zero := 0
	wantViews := []containerView{
		{Name: "setup", Reason: inspect.ReasonNotSelected, Init: true},
		{Name: "main", Reason: numav1.ReasonApplied, Source: "NumaPreference/pref", PlacedAt: PlacedAtAfterStart, Desired: &zero},
		{Name: "side", Reason: inspect.ReasonNotSelected},
	}
	if diff := cmp.Diff(wantViews, views); diff != "" {
		t.Fatalf("containers (-want +got):\n%s", diff)
	}
	if got.APIVersion != inspect.APIVersion || got.Kind != inspect.Kind || got.Node != "node-a" ||
		got.UID != string(d.PodUID) || got.Kernel.Backend != "emulator" || !got.Kernel.Supported {
		t.Errorf("header = %s %s node %s uid %s kernel %+v", got.APIVersion, got.Kind, got.Node, got.UID, got.Kernel)
	}

	setup, main, sidecar := got.Containers[0], got.Containers[1], got.Containers[2]
	if setup.Cgroup != nil || setup.CgroupError == "" || len(setup.Tasks) != 0 {
		t.Errorf("init container that never started: cgroup %v, error %q, %d tasks", setup.Cgroup, setup.CgroupError, len(setup.Tasks))
	}

	// The selected container: every task it has now, forced to 0 by the engine, effective
	// as this kernel's /proc/<tid>/sched shows it, and listed unless born after the pass.
	checkTasks(t, "main", main, db.Pid(), before[db.Pid()], func(tid int) int { return 0 })
	if main.Cgroup == nil || !strings.HasSuffix(main.Cgroup.TasksDir, "/"+d.Ref.ContainerID[len("containerd://"):]) {
		t.Errorf("main cgroup = %+v, want the lab container's directory", main.Cgroup)
	}
	if main.Cpuset == nil || !slices.Equal(main.Cpuset.Mems, []int{0}) && !main.Cpuset.ControllerMissing {
		t.Errorf("main cpuset = %+v (%s), want mems [0] (this host's only node)", main.Cpuset, main.CpusetError)
	}
	listedNow, unlisted := 0, 0
	for _, task := range main.Tasks {
		switch {
		case task.Listed:
			listedNow++
		case !slices.Contains(seen, task.TID):
			unlisted++
		}
		if task.TID == db.Pid() && !task.Listed {
			t.Errorf("main thread %d: listed = false; the pass listed it", task.TID)
		}
		if !slices.Contains(seen, task.TID) && task.Listed {
			t.Errorf("main task %d: listed = true, but it was born after the pass", task.TID)
		}
	}
	if unlisted == 0 {
		t.Errorf("main tasks %+v: none unlisted, but threads were started after the pass", main.Tasks)
	}
	if main.ManagedTasks != listedNow {
		t.Errorf("main managedTasks = %d, want the %d tasks the pass listed (all set)", main.ManagedTasks, listedNow)
	}

	// The unselected container: the application's own value on its main thread, none
	// elsewhere; the agent wants nothing.
	checkTasks(t, "side", sidecar, sideW.Pid(), before[sideW.Pid()], func(tid int) int {
		if tid == sideW.Pid() {
			return 1
		}
		return -1
	})
	if sidecar.ManagedTasks != 0 || slices.ContainsFunc(sidecar.Tasks, func(t inspect.Task) bool { return t.Listed }) {
		t.Errorf("unselected container reports managed tasks: %+v", sidecar)
	}
}

// checkTasks compares a container's reported tasks with process pid's threads on the host
// (every one of before, and only ones that run now), the kernel backend's forced value
// with want(tid), and the effective value with /proc/<tid>/sched.
func checkTasks(t *testing.T, name string, c inspect.Container, pid int, before []int, want func(tid int) int) {
	t.Helper()
	if c.TasksError != "" {
		t.Fatalf("%s: tasks error %s", name, c.TasksError)
	}
	after, err := hostlab.TasksOf(pid)
	if err != nil {
		t.Fatal(err)
	}
	var tids []int
	for _, task := range c.Tasks {
		tids = append(tids, task.TID)
		if task.TGID != pid {
			t.Errorf("%s task %d: tgid %d, want %d", name, task.TID, task.TGID, pid)
		}
		if task.Forced == nil || *task.Forced != want(task.TID) {
			t.Errorf("%s task %d: forced %v (%s), want %d", name, task.TID, deref(task.Forced), task.ForcedError, want(task.TID))
		}
		s, err := numa.ReadSchedNUMA("/proc", task.TID)
		if err != nil {
			t.Fatal(err)
		}
		if task.Effective == nil || *task.Effective != s.PreferredNID {
			t.Errorf("%s task %d: effective %v (%s), want %d from /proc/%d/sched", name, task.TID, deref(task.Effective), task.EffectiveError, s.PreferredNID, task.TID)
		}
	}
	if !slices.IsSorted(tids) {
		t.Errorf("%s tids = %v, want them sorted", name, tids)
	}
	for _, tid := range before {
		if !slices.Contains(tids, tid) {
			t.Errorf("%s tids = %v: thread %d of the host is missing", name, tids, tid)
		}
	}
	for _, tid := range tids {
		if !slices.Contains(after, tid) {
			t.Errorf("%s tids = %v: %d is no thread of process %d (%v)", name, tids, tid, pid, after)
		}
	}
}

func deref(p *int) any {
	if p == nil {
		return "null"
	}
	return *p
}

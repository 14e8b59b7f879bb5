// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build host && linux

package cgroups

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/numapref/numapref/internal/numa"
	"github.com/numapref/numapref/internal/testutil/testenv"
)

// cgroup2Mount returns the cgroup2 mount's directory under /sys/fs/cgroup: "." on a
// cgroup2 host, "unified" on a hybrid one, "" if there is none.
func cgroup2Mount() string {
	for _, dir := range []string{".", "unified"} {
		if fileExists(filepath.Join(sysCgroup, dir, "cgroup.controllers")) {
			return dir
		}
	}
	return ""
}

// requireCgroup2 needs a cgroup2 mount under /sys/fs/cgroup (the unified hierarchy of a
// hybrid host will do).
func requireCgroup2(t testing.TB) {
	t.Helper()
	testenv.Require(t, cgroup2Mount() != "", "a cgroup2 mount at "+sysCgroup+" or "+sysCgroup+"/unified",
		"a host with cgroup2 (unified or hybrid hierarchy)")
}

// TestRealPIDReuse: a listed task exits and the kernel gives its pid to a new process in
// the same container (forced through /proc/sys/kernel/ns_last_pid). The new process is
// listed under the same id but must not pass for the old task.
func TestRealPIDReuse(t *testing.T) {
	requireCgroup2(t)
	mount := cgroup2Mount()
	requireRealCgroups(t, filepath.Join(mount, "cgroup.procs"))
	testenv.RequireFile(t, "/proc/sys/kernel/ns_last_pid", "a kernel with CONFIG_CHECKPOINT_RESTORE (ns_last_pid)")

	// A cgroupfs-driver tree under a test-owned cgroup root.
	root := filepath.Join(sysCgroup, mount, "numapref-test-"+randomHex(t, 4))
	uid := "7e57" + randomHex(t, 2) + "-0000-4000-8000-" + randomHex(t, 6)
	id := randomHex(t, 32)
	tree := newCgroupTree(t)
	tree.mkdir(root, "")
	ctrDir := root
	for _, part := range []string{"kubepods", "besteffort", "pod" + uid, id} {
		ctrDir = filepath.Join(ctrDir, part)
		tree.mkdir(ctrDir, "")
	}
	r, err := NewResolver("/", ResolverOptions{CgroupRoot: root})
	if err != nil {
		t.Fatalf("NewResolver: %v", err)
	}
	c, err := r.Resolve(ContainerRef{PodUID: uid, QOS: corev1.PodQOSBestEffort, ContainerID: "containerd://" + id})
	if err != nil {
		t.Fatalf("Resolve: %v", err)
	}

	first := startTaskHelper(t, 1)
	pid := first.pid
	if err := writeCgroupFile(filepath.Join(ctrDir, "cgroup.procs"), strconv.Itoa(pid)); err != nil {
		t.Fatal(err)
	}
	var refs []TaskRef
	eventually(t, "ListTIDs", func() string {
		want := procTaskRefs(t, pid)
		if refs, err = r.ListTIDs(c); err != nil {
			return err.Error()
		}
		return cmp.Diff(want, refs)
	})
	ids, err := r.Identify(c, refs)
	if err != nil {
		t.Fatalf("Identify: %v", err)
	}
	var old IdentifiedTask
	for _, task := range ids {
		if task.TID == pid {
			old = task
		}
	}
	if old.TID == 0 {
		t.Fatalf("Identify(%v) = %v: no task %d", refs, ids, pid)
	}

	// The task exits. Start times count clock ticks, so let one pass before its pid is
	// handed out again: a reuse within the same tick is indistinguishable by design.
	first.stop(t)
	eventually(t, "clock tick after the first task's start", func() string {
		if ticks := uptimeTicks(t); ticks <= old.StartTime {
			return "uptime " + strconv.FormatUint(ticks, 10) + " ticks"
		}
		return ""
	})
	second := forcePID(t, pid)
	if err := writeCgroupFile(filepath.Join(ctrDir, "cgroup.procs"), strconv.Itoa(second.pid)); err != nil {
		t.Fatal(err)
	}

	// Same id listed again...
	eventually(t, "ListTIDs after reuse", func() string {
		want := procTaskRefs(t, pid)
		if refs, err = r.ListTIDs(c); err != nil {
			return err.Error()
		}
		return cmp.Diff(want, refs)
	})
	// ...but not the same task.
	if err := old.Verify(r.ProcRoot()); !errors.Is(err, numa.ErrTaskReplaced) {
		t.Errorf("Verify(old task %+v) = %v, want numa.ErrTaskReplaced", old.Task, err)
	}
	now, err := r.Identify(c, []TaskRef{{TGID: pid, TID: pid}})
	if err != nil {
		t.Fatalf("Identify: %v", err)
	}
	if len(now) != 1 || now[0].TID != pid || now[0].StartTime == old.StartTime {
		t.Errorf("Identify after reuse = %+v; want task %d with a start time other than %d", now, pid, old.StartTime)
	}
	if err := now[0].Verify(r.ProcRoot()); err != nil {
		t.Errorf("Verify(new task): %v", err)
	}
}

// uptimeTicks returns the time since boot in clock ticks (USER_HZ, 100 on Linux), the
// unit of a task's start time.
func uptimeTicks(t testing.TB) uint64 {
	f := strings.Fields(readTrimmed(t, "/proc/uptime"))
	secs, frac, _ := strings.Cut(f[0], ".")
	s, err1 := strconv.ParseUint(secs, 10, 64)
	c, err2 := strconv.ParseUint((frac + "00")[:2], 10, 64)
	if err1 != nil || err2 != nil {
		t.Fatalf("parsing /proc/uptime %q", f[0])
	}
	return s*100 + c
}

// forcePID starts a helper process with pid, by setting the PID namespace's last pid just
// below it. Other processes on the host may take the pid first; it retries for a while.
func forcePID(t *testing.T, pid int) *taskHelper {
	t.Helper()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	f, err := os.OpenFile("/proc/sys/kernel/ns_last_pid", os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	deadline := time.Now().Add(20 * time.Second)
	for attempt := 1; time.Now().Before(deadline); attempt++ {
		if _, err := f.WriteAt([]byte(strconv.Itoa(pid-1)), 0); err != nil {
			t.Fatalf("writing ns_last_pid: %v", err)
		}
		h := startTaskHelper(t, 1)
		if h.pid == pid {
			t.Logf("pid %d reused after %d attempt(s)", pid, attempt)
			return h
		}
		h.stop(t)
	}
	testenv.Require(t, false, fmt.Sprintf("pid %d free to be taken back within 20 s (other processes kept taking it)", pid),
		"run on a quieter host")
	return nil
}

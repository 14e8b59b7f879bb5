// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build host

package hostlab

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"

	"github.com/numapref/numapref/internal/numa/mempolicy"
	"github.com/numapref/numapref/internal/testutil/poll"
	"github.com/numapref/numapref/internal/testutil/testenv"
)

func TestMain(m *testing.M) {
	RunWorkloadIfAsked()
	os.Exit(m.Run())
}

func readIDs(t *testing.T, f string) []int {
	t.Helper()
	data, err := os.ReadFile(f)
	if err != nil {
		t.Fatal(err)
	}
	var ids []int
	for _, s := range strings.Fields(string(data)) {
		id, _ := strconv.Atoi(s)
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

func TestLabOnRealCgroups(t *testing.T) {
	testenv.RequireRoot(t) // it makes real cgroups
	lab, err := New("/sys/fs/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	c, err := lab.Container(corev1.PodQOSBurstable, "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0", strings.Repeat("ab", 32))
	if err != nil {
		t.Fatal(err)
	}
	w, err := c.StartWorkload(4)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range lab.hiers {
		dir := filepath.Join(h, c.path)
		if got := readIDs(t, filepath.Join(dir, "cgroup.procs")); !slices.Equal(got, []int{w.Pid()}) {
			t.Errorf("%s/cgroup.procs = %v, want [%d]", dir, got, w.Pid())
		}
		tasksFile := "tasks"
		if lab.Version() == 2 {
			tasksFile = "cgroup.threads"
		}
		// The Go runtime may add a thread at any time: compare until a read agrees.
		var got, tids []int
		for try := 0; try < 50; try++ {
			if tids, err = w.TIDs(); err != nil {
				t.Fatal(err)
			}
			slices.Sort(tids)
			if got = readIDs(t, filepath.Join(dir, tasksFile)); slices.Equal(got, tids) {
				break
			}
		}
		if !slices.Equal(got, tids) {
			t.Errorf("%s/%s = %v, want %v", dir, tasksFile, got, tids)
		}
		if len(tids) < 5 {
			t.Errorf("workload has %d threads, want at least 5", len(tids))
		}
	}
	shell, forked, err := w.Fork()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := w.RawFork()
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Threads(1); err != nil {
		t.Fatal(err) // the workload still answers after forking
	}
	procs := readIDs(t, filepath.Join(lab.hiers[0], c.path, "cgroup.procs"))
	for _, pid := range []int{shell, forked, raw} {
		if !slices.Contains(procs, pid) {
			t.Errorf("forked pid %d is not in the container's cgroup.procs %v", pid, procs)
		}
	}

	if err := lab.Close(); err != nil {
		t.Fatal(err)
	}
	for _, h := range lab.hiers {
		if _, err := os.Stat(filepath.Join(h, lab.name)); !os.IsNotExist(err) {
			t.Errorf("lab cgroup %s left behind (%v)", filepath.Join(h, lab.name), err)
		}
	}
	for _, pid := range []int{forked, raw} {
		if Running(pid) {
			t.Errorf("forked child %d still runs after Close", pid)
		}
	}
}

// The stream command touches its memory while its threads are pinned, then unpins them and
// keeps them streaming: the threads it names are the workload's, run on every CPU again,
// and the memory is resident.
func TestStreamWorkload(t *testing.T) {
	testenv.RequireRoot(t) // it makes real cgroups
	lab, err := New("/sys/fs/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	defer lab.Close()
	c, err := lab.Container(corev1.PodQOSBestEffort, "5e4d3c2b-1a09-4f8e-9d7c-6b5a49382716", strings.Repeat("cd", 32))
	if err != nil {
		t.Fatal(err)
	}
	w, err := c.StartWorkload(0)
	if err != nil {
		t.Fatal(err)
	}
	tids, err := w.Stream(16, 2, "0")
	if err != nil {
		t.Fatal(err)
	}
	all, err := w.TIDs()
	if err != nil {
		t.Fatal(err)
	}
	if len(tids) != 2 || !slices.Contains(all, tids[0]) || !slices.Contains(all, tids[1]) || tids[0] == tids[1] {
		t.Fatalf("stream threads %v, want 2 distinct threads of the workload (%v)", tids, all)
	}
	var want unix.CPUSet
	if err := unix.SchedGetaffinity(0, &want); err != nil {
		t.Fatal(err)
	}
	for _, tid := range tids {
		// The unpin follows the touch at once; allow the thread a moment to get there.
		var got unix.CPUSet
		_ = poll.Until(5*time.Second, func() error { // the assertion below says what is wrong
			if err := unix.SchedGetaffinity(tid, &got); err != nil {
				t.Fatal(err)
			}
			if got != want {
				return errors.New("still pinned")
			}
			return nil
		})
		if got != want {
			t.Errorf("thread %d affinity %v after the touch, want every CPU (%v)", tid, got, want)
		}
	}
	mem, err := ProcessMemory(w.Pid())
	if err != nil {
		t.Fatal(err)
	}
	if mem.Anon < 16<<10 {
		t.Errorf("RssAnon %d kB, want the 16 MiB touched", mem.Anon)
	}
}

// ProcessMemory reads a live process's resident memory, and says when the process is gone.
func TestProcessMemory(t *testing.T) {
	m, err := ProcessMemory(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	// VmRSS is RssAnon + RssFile + RssShmem.
	if m.Anon == 0 || m.File == 0 || m.RSS < m.Anon+m.File {
		t.Errorf("memory %+v: want anonymous and file-backed pages, VmRSS at least their sum", m)
	}
	if _, err := ProcessMemory(1 << 30); err == nil {
		t.Error("ProcessMemory of a pid that cannot exist succeeded")
	}
}

// ProcessCPU counts the CPU this process burns, and says when the process is gone.
func TestProcessCPU(t *testing.T) {
	before, err := ProcessCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	// Reading /proc burns CPU: the count must grow by a tick well within the deadline.
	after, deadline := before, time.Now().Add(10*time.Second)
	for after <= before {
		if time.Now().After(deadline) {
			t.Fatalf("the process's CPU time stayed at %s while it ran for 10 s", before)
		}
		if after, err = ProcessCPU(os.Getpid()); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := ProcessCPU(1 << 30); err == nil {
		t.Error("ProcessCPU of a pid that cannot exist succeeded")
	}
}

// A workload started with a memory policy holds it from its start, in its process and its
// threads, and the test process's own threads keep theirs: the spawner thread takes it
// for the start alone.
func TestStartWorkloadWithPolicy(t *testing.T) {
	testenv.RequireRoot(t)
	lab, err := New("/sys/fs/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = lab.Close() })
	c, err := lab.Container(corev1.PodQOSBurstable, "1f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0", strings.Repeat("cd", 32))
	if err != nil {
		t.Fatal(err)
	}
	p := mempolicy.Preferred(0)
	w, err := c.StartWorkloadWithPolicy(2, &p)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if err := w.Alloc(4); err != nil {
		t.Fatal(err)
	}
	tids, err := w.TIDs()
	if err != nil {
		t.Fatal(err)
	}
	for _, tid := range tids {
		got, err := mempolicy.ReadThreadPolicy("/proc", w.Pid(), tid)
		if err != nil {
			t.Fatal(err)
		}
		if !got.Equal(p) {
			t.Errorf("thread %d of the workload holds %s, want %s", tid, got, p)
		}
	}
	plain, err := c.StartWorkload(0)
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Stop()
	if err := plain.Alloc(4); err != nil {
		t.Fatal(err)
	}
	if got, err := mempolicy.ReadTaskPolicy("/proc", plain.Pid()); err != nil || !got.Equal(mempolicy.Policy{}) {
		t.Errorf("a workload started after holds %s (%v), want the default: the spawner kept the policy", got, err)
	}
}

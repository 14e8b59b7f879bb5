// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build host && linux

package cgroups

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/numapref/numapref/internal/cpuset"
	"github.com/numapref/numapref/internal/numa"
	"github.com/numapref/numapref/internal/testutil/poll"
	"github.com/numapref/numapref/internal/testutil/testenv"
)

// The tests in this file change the machine's real cgroups: they need root and a cgroup
// filesystem at /sys/fs/cgroup. Everything they make lives under a top directory named
// numapref-test-<random> (numapreftest<random> where systemd naming forbids dashes) and is
// removed at the end: processes are moved back to the test's own cgroups and killed,
// then the directories are removed deepest first.

const sysCgroup = "/sys/fs/cgroup"

const taskHelperEnv = "NUMAPREF_TASK_HELPER"

// TestMain lets the test binary run as the helper process of the real-cgroup tests.
func TestMain(m *testing.M) {
	runTaskHelperIfAsked()
	os.Exit(m.Run())
}

// runTaskHelperIfAsked is the helper process startTaskHelper runs (taskHelperEnv set to
// a number of threads): it starts that many extra threads, says "ready" and waits for its
// stdin to close, then exits. Otherwise it returns at once.
func runTaskHelperIfAsked() {
	v, ok := os.LookupEnv(taskHelperEnv)
	if !ok {
		return
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s=%q: %v\n", taskHelperEnv, v, err)
		os.Exit(2)
	}
	for range n {
		go func() {
			runtime.LockOSThread() // keeps this goroutine's thread for good
			select {}
		}()
	}
	// Wait until the threads exist so the parent sees a settled task list.
	deadline := time.Now().Add(10 * time.Second)
	for countTasks(os.Getpid()) < n+1 && time.Now().Before(deadline) {
		runtime.Gosched()
	}
	fmt.Println("ready")
	_, _ = io.Copy(io.Discard, os.Stdin)
	os.Exit(0)
}

func countTasks(pid int) int {
	ids, _ := numa.ListThreads("/proc", pid)
	return len(ids)
}

type taskHelper struct {
	pid   int
	cmd   *exec.Cmd
	stdin io.WriteCloser
}

// startTaskHelper starts a child process with threads extra threads. At cleanup it is
// moved back to the test's own cgroups, killed and reaped.
func startTaskHelper(t testing.TB, threads int) *taskHelper {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%d", taskHelperEnv, threads))
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting helper: %v", err)
	}
	h := &taskHelper{pid: cmd.Process.Pid, cmd: cmd, stdin: stdin}
	t.Cleanup(func() { h.stop(t) })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || line != "ready\n" {
		t.Fatalf("helper %d: read %q, %v; want ready", h.pid, line, err)
	}
	return h
}

// stop moves the helper back to the test's own cgroups, kills it and reaps it.
func (h *taskHelper) stop(t testing.TB) {
	if h.cmd == nil {
		return
	}
	for hierarchy, path := range ownCgroups(t) {
		// Best effort: the hierarchy may not be one the test used.
		_ = writeCgroupFile(filepath.Join(sysCgroup, hierarchy, path, "cgroup.procs"), strconv.Itoa(h.pid))
	}
	_ = h.stdin.Close()
	_ = h.cmd.Process.Kill()
	_ = h.cmd.Wait()
	h.cmd = nil
}

// ownCgroups maps the hierarchy directories under /sys/fs/cgroup to this process's cgroup
// in each, from /proc/self/cgroup.
func ownCgroups(t testing.TB) map[string]string {
	data, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]string{}
	for line := range strings.Lines(string(data)) {
		parts := strings.SplitN(strings.TrimSpace(line), ":", 3)
		if len(parts) != 3 {
			continue
		}
		switch ctrl := parts[1]; {
		case parts[0] == "0" && ctrl == "":
			if fileExists(filepath.Join(sysCgroup, "cgroup.controllers")) {
				m["."] = parts[2]
			} else {
				m["unified"] = parts[2]
			}
		case ctrl == "name=systemd":
			m["systemd"] = parts[2]
		default:
			m[ctrl] = parts[2]
		}
	}
	return m
}

func writeCgroupFile(path, content string) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString(content)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("writing %q to %s: %w", content, path, err)
	}
	return nil
}

// cgroupTree makes cgroup directories and removes them, deepest first, at cleanup.
type cgroupTree struct {
	t    testing.TB
	dirs []string
}

func newCgroupTree(t testing.TB) *cgroupTree {
	tr := &cgroupTree{t: t}
	t.Cleanup(tr.removeAll)
	return tr
}

// mkdir makes dir; in a v1 cpuset hierarchy it first gives it cpus (by default its
// parent's) and its parent's mems (a new v1 cpuset is empty and takes no task).
func (tr *cgroupTree) mkdir(dir, cpus string) {
	tr.t.Helper()
	if err := os.Mkdir(dir, 0o755); err != nil {
		if len(tr.dirs) == 0 && (errors.Is(err, syscall.EROFS) || errors.Is(err, os.ErrPermission)) {
			testenv.RequireNoError(tr.t, err, "making test cgroups under "+sysCgroup, "sudo make host, on a host whose cgroup filesystems are writable")
		}
		tr.t.Fatal(err)
	}
	tr.dirs = append(tr.dirs, dir)
	if !fileExists(filepath.Join(dir, "cpuset.effective_cpus")) {
		return
	}
	parent := filepath.Dir(dir)
	if cpus == "" {
		cpus = readTrimmed(tr.t, filepath.Join(parent, "cpuset.effective_cpus"))
	}
	mems := readTrimmed(tr.t, filepath.Join(parent, "cpuset.effective_mems"))
	for file, v := range map[string]string{"cpuset.cpus": cpus, "cpuset.mems": mems} {
		if err := writeCgroupFile(filepath.Join(dir, file), v); err != nil {
			tr.t.Fatal(err)
		}
	}
}

func (tr *cgroupTree) removeAll() {
	for i := len(tr.dirs) - 1; i >= 0; i-- {
		dir := tr.dirs[i]
		// A cgroup whose last task just exited can be busy for a moment.
		deadline := time.Now().Add(10 * time.Second)
		for {
			err := syscall.Rmdir(dir)
			if err == nil || errors.Is(err, syscall.ENOENT) {
				break
			}
			if !errors.Is(err, syscall.EBUSY) || time.Now().After(deadline) {
				tr.t.Errorf("removing test cgroup %s: %v", dir, err)
				break
			}
			runtime.Gosched()
		}
	}
}

func readTrimmed(t testing.TB, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(data))
}

func randomHex(t testing.TB, n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// procTaskRefs lists the threads of processes from /proc.
func procTaskRefs(t testing.TB, pids ...int) []TaskRef {
	var refs []TaskRef
	for _, pid := range pids {
		tids, err := numa.ListThreads("/proc", pid)
		if err != nil {
			t.Fatal(err)
		}
		for _, tid := range tids {
			refs = append(refs, TaskRef{TGID: pid, TID: tid})
		}
	}
	slices.SortFunc(refs, func(a, b TaskRef) int { return a.TID - b.TID })
	return refs
}

// someThread returns a thread of pid other than its leader.
func someThread(t testing.TB, pid int) int {
	for _, ref := range procTaskRefs(t, pid) {
		if ref.TID != pid {
			return ref.TID
		}
	}
	t.Fatalf("process %d has no thread besides its leader", pid)
	return 0
}

// eventually polls check until it returns "" or the deadline passes, then fails with the
// last complaint.
func eventually(t testing.TB, what string, check func() string) {
	t.Helper()
	poll.NoError(t, 15*time.Second, what, func() error {
		if msg := check(); msg != "" {
			return errors.New(msg)
		}
		return nil
	})
}

func requireRealCgroups(t testing.TB, need ...string) {
	t.Helper()
	testenv.RequireRoot(t) // changes cgroups
	for _, p := range need {
		testenv.RequireFile(t, filepath.Join(sysCgroup, p), "a host with this cgroup hierarchy mounted under "+sysCgroup)
	}
	sweepStaleTestCgroups()
}

// sweepStaleTestCgroups removes what an earlier, killed test run left behind: test top
// directories older than ten minutes (younger ones may belong to a run in progress). Their
// helper processes exit by themselves when the test binary dies (their stdin closes), and
// rmdir only removes empty, unpopulated cgroups.
func sweepStaleTestCgroups() {
	hierarchies, _ := os.ReadDir(sysCgroup)
	bases := []string{sysCgroup}
	for _, h := range hierarchies {
		bases = append(bases, filepath.Join(sysCgroup, h.Name()))
	}
	for _, base := range bases {
		entries, _ := os.ReadDir(base)
		for _, e := range entries {
			name := e.Name()
			if !e.IsDir() || !strings.HasPrefix(name, "numapref-test-") && !strings.HasPrefix(name, "numapreftest") {
				continue
			}
			if info, err := e.Info(); err != nil || time.Since(info.ModTime()) < 10*time.Minute {
				continue
			}
			removeCgroupTree(filepath.Join(base, name))
		}
	}
}

// removeCgroupTree removes dir and its sub-cgroups, deepest first, ignoring failures.
func removeCgroupTree(dir string) {
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if e.IsDir() {
			removeCgroupTree(filepath.Join(dir, e.Name()))
		}
	}
	_ = syscall.Rmdir(dir)
}

// realLayout describes one kubepods-shaped tree to build on the host.
type realLayout struct {
	version     int
	driver      string
	runtime     string
	qos         corev1.PodQOSClass
	hierarchies []string // v1: hierarchy dirs to build in; v2: set to the cgroup2 mount, relative to /sys/fs/cgroup
	// names returns, for a random suffix, the kubelet cgroup root option, the test's top
	// directory (v1: first component of podPath; v2: the test's cgroup root under the
	// mount), the pod's cgroup path relative to the resolver's root, and the container's
	// and its siblings' directory names.
	names func(suffix, uid, id string) (kubeletRoot, topDir, podPath, leaf string, siblings []string)
}

func TestRealCgroupTasks(t *testing.T) {
	tests := map[string]realLayout{
		"v1 cgroupfs containerd burstable": {
			version: 1, driver: DriverCgroupfs, runtime: RuntimeContainerd, qos: corev1.PodQOSBurstable,
			hierarchies: []string{"pids", "cpuset", "systemd"},
			names: func(top, uid, id string) (string, string, string, string, []string) {
				top = "numapref-test-" + top
				return top, top, top + "/kubepods/burstable/pod" + uid, id, []string{strings.Repeat("5", 64)}
			},
		},
		"v1 systemd crio guaranteed": {
			version: 1, driver: DriverSystemd, runtime: RuntimeCRIO, qos: corev1.PodQOSGuaranteed,
			hierarchies: []string{"pids", "cpuset", "systemd"},
			names: func(top, uid, id string) (string, string, string, string, []string) {
				top = "numapreftest" + top
				return "/" + top, top + ".slice", top + ".slice/" + top + "-kubepods.slice/" + top + "-kubepods-pod" +
						strings.ReplaceAll(uid, "-", "_") + ".slice",
					"crio-" + id + ".scope", []string{"crio-conmon-" + id + ".scope"}
			},
		},
		"v2 cgroupfs docker besteffort threaded": {
			version: 2, driver: DriverCgroupfs, runtime: RuntimeDocker, qos: corev1.PodQOSBestEffort,
			// hierarchies: the cgroup2 mount, found at run time
			names: func(top, uid, id string) (string, string, string, string, []string) {
				top = "numapref-test-" + top
				return "", top, "kubepods/besteffort/pod" + uid, id, []string{strings.Repeat("5", 64)}
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if tc.version == 2 {
				tc.hierarchies = []string{cgroup2Mount()}
				requireCgroup2(t)
			}
			need := []string{}
			for _, h := range tc.hierarchies {
				need = append(need, h+"/cgroup.procs")
			}
			requireRealCgroups(t, need...)
			testRealCgroupTasks(t, tc)
		})
	}
}

func testRealCgroupTasks(t *testing.T, tc realLayout) {
	uid := "7e57" + randomHex(t, 2) + "-0000-4000-8000-" + randomHex(t, 6)
	id := randomHex(t, 32)
	kubeletRoot, topDir, podPath, leaf, siblings := tc.names(randomHex(t, 4), uid, id)
	ctrPath := podPath + "/" + leaf

	// Build the tree in every hierarchy: the top, kubepods levels, pod, container and
	// siblings, and under the container the sub-cgroups tasks will be spread over.
	tree := newCgroupTree(t)
	lastCPU := ""
	var subs []string // sub-cgroups of the container, parents first
	if tc.version == 1 {
		subs = []string{"nested", "nested/deeper", "ephemeral"}
	} else {
		subs = []string{"threaded", "threaded/deeper", "ephemeral"}
	}
	root := func(h string) string { // the resolver's view of hierarchy h's root
		if tc.version == 2 {
			return filepath.Join(sysCgroup, h, topDir)
		}
		return filepath.Join(sysCgroup, h)
	}
	ctrDir := func(h, sub string) string { return filepath.Join(root(h), ctrPath, sub) }
	for _, h := range tc.hierarchies {
		if tc.version == 2 {
			tree.mkdir(root(h), "")
		}
		prefix := ""
		for _, part := range strings.Split(podPath, "/") {
			prefix = filepath.Join(prefix, part)
			tree.mkdir(filepath.Join(root(h), prefix), "")
		}
		cpus := ""
		if h == "cpuset" {
			all, err := numa.ParseList(readTrimmed(t, filepath.Join(root(h), "cpuset.effective_cpus")))
			if err != nil || len(all) == 0 {
				t.Fatalf("root cpuset: %v %v", all, err)
			}
			lastCPU = strconv.Itoa(all[len(all)-1])
			cpus = lastCPU
		}
		tree.mkdir(ctrDir(h, ""), cpus)
		for _, s := range siblings {
			tree.mkdir(filepath.Join(root(h), podPath, s), "")
		}
		for _, s := range subs {
			tree.mkdir(ctrDir(h, s), "")
			if tc.version == 2 && s != "ephemeral" {
				if err := writeCgroupFile(filepath.Join(ctrDir(h, s), "cgroup.type"), "threaded"); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	move := func(file string, id int, dir func(h string) string) {
		t.Helper()
		for _, h := range tc.hierarchies {
			if err := writeCgroupFile(filepath.Join(dir(h), file), strconv.Itoa(id)); err != nil {
				t.Fatal(err)
			}
		}
	}

	// A: the container's main process; B: a second process; threads of each in
	// sub-cgroups. D: a decoy in the sibling cgroup (sandbox or conmon) that must not be listed.
	a, b, d := startTaskHelper(t, 4), startTaskHelper(t, 3), startTaskHelper(t, 2)
	threadsFile := "tasks"
	if tc.version == 2 {
		threadsFile = "cgroup.threads"
	}
	move("cgroup.procs", a.pid, func(h string) string { return ctrDir(h, "") })
	if tc.version == 1 {
		// nested holds B and a thread of A: two processes, so the threads' owners come
		// from /proc; deeper holds a thread of B.
		move("cgroup.procs", b.pid, func(h string) string { return ctrDir(h, "nested") })
		move(threadsFile, someThread(t, a.pid), func(h string) string { return ctrDir(h, "nested") })
		move(threadsFile, someThread(t, b.pid), func(h string) string { return ctrDir(h, "nested/deeper") })
	} else {
		move("cgroup.procs", b.pid, func(h string) string { return ctrDir(h, "") })
		move(threadsFile, someThread(t, a.pid), func(h string) string { return ctrDir(h, "threaded") })
		move(threadsFile, someThread(t, b.pid), func(h string) string { return ctrDir(h, "threaded/deeper") })
	}
	move("cgroup.procs", d.pid, func(h string) string {
		return filepath.Join(filepath.Dir(ctrDir(h, "")), siblings[0])
	})

	opts := ResolverOptions{KubeletCgroupRoot: kubeletRoot}
	if tc.version == 2 {
		opts.CgroupRoot = root(tc.hierarchies[0])
	}
	r, err := NewResolver("/", opts)
	if err != nil {
		t.Fatalf("NewResolver: %v", err)
	}
	if got := r.Layout(); got.Version != tc.version || got.Driver != tc.driver {
		t.Fatalf("Layout = %+v, want version %d driver %s", got, tc.version, tc.driver)
	}
	ref := ContainerRef{PodUID: uid, QOS: tc.qos, ContainerID: tc.runtime + "://" + id}
	c, err := r.Resolve(ref)
	if err != nil {
		t.Fatalf("Resolve: %v", err)
	}
	if want := "/" + ctrPath; c.Path != want {
		t.Errorf("Path = %s, want %s", c.Path, want)
	}
	if want := ctrDir(tc.hierarchies[0], ""); c.TasksDir != want {
		t.Errorf("TasksDir = %s, want %s", c.TasksDir, want)
	}

	// The tasks: every thread of A and B, nothing of D, the test or the host. Go's runtime
	// may still be starting threads in the helpers, so compare until both sides agree.
	eventually(t, "ListTIDs", func() string {
		want := procTaskRefs(t, a.pid, b.pid)
		got, err := r.ListTIDs(c)
		if err != nil {
			return err.Error()
		}
		return cmp.Diff(want, got)
	})

	// A sub-cgroup removed while the walk is under way is no error.
	r.walkHook = func(sub string) {
		if filepath.Base(sub) == "ephemeral" {
			if err := syscall.Rmdir(sub); err != nil {
				t.Errorf("removing %s: %v", sub, err)
			}
		}
	}
	eventually(t, "ListTIDs while a sub-cgroup vanishes", func() string {
		want := procTaskRefs(t, a.pid, b.pid)
		got, err := r.ListTIDs(c)
		if err != nil {
			return err.Error()
		}
		return cmp.Diff(want, got)
	})
	r.walkHook = nil

	wantCpuset := cpuset.Cpuset{ControllerMissing: true}
	if tc.version == 1 {
		cpu, _ := strconv.Atoi(lastCPU)
		mems, err := numa.ParseList(readTrimmed(t, filepath.Join(sysCgroup, "cpuset", "cpuset.effective_mems")))
		if err != nil {
			t.Fatal(err)
		}
		wantCpuset = cpuset.Cpuset{CPUs: []int{cpu}, Mems: mems, Dir: ctrDir("cpuset", "")}
	}
	cs, err := r.Cpuset(c)
	if err != nil {
		t.Fatalf("Cpuset: %v", err)
	}
	if diff := cmp.Diff(wantCpuset, cs); diff != "" {
		t.Errorf("Cpuset (-want +got):\n%s", diff)
	}

	// Identities read between two listings match /proc.
	refs, err := r.ListTIDs(c)
	if err != nil {
		t.Fatalf("ListTIDs: %v", err)
	}
	ids, err := r.Identify(c, refs)
	if err != nil {
		t.Fatalf("Identify: %v", err)
	}
	for _, task := range ids {
		if err := task.Verify(r.ProcRoot()); err != nil {
			t.Errorf("Verify(%+v): %v", task, err)
		}
	}
	if len(ids) != len(refs) {
		t.Errorf("Identify kept %d of %d tasks", len(ids), len(refs))
	}

	// The container exits: its tasks leave and its cgroups go.
	a.stop(t)
	b.stop(t)
	for _, h := range tc.hierarchies {
		for i := len(subs) - 1; i >= 0; i-- {
			_ = syscall.Rmdir(ctrDir(h, subs[i]))
		}
		if err := syscall.Rmdir(ctrDir(h, "")); err != nil {
			t.Fatalf("removing container cgroup: %v", err)
		}
	}
	if _, err := r.ListTIDs(c); !errors.Is(err, ErrContainerNotFound) {
		t.Errorf("ListTIDs after exit: %v, want ErrContainerNotFound", err)
	}
	if _, err := r.Cpuset(c); tc.version == 1 && !errors.Is(err, ErrContainerNotFound) {
		t.Errorf("Cpuset after exit: %v, want ErrContainerNotFound", err)
	}
	if _, err := r.Resolve(ref); !errors.Is(err, ErrContainerNotFound) {
		t.Errorf("Resolve after exit: %v, want ErrContainerNotFound", err)
	}
}

// BenchmarkRealResolveAndList resolves and lists 100 containers on the host's real
// cgroups, each a process with 50 threads (49 started by the helper, plus Go's own):
// one per-pass cost of the agent on a busy node, kernel included.
func BenchmarkRealResolveAndList(b *testing.B) {
	const containers, threads = 100, 49
	layouts := map[string]string{"v1-pids": "pids"}
	if m := cgroup2Mount(); m != "" {
		layouts["v2"] = m
	}
	for name, hierarchy := range layouts {
		b.Run(name, func(b *testing.B) {
			requireRealCgroups(b, filepath.Join(hierarchy, "cgroup.procs"))
			top := "numapref-test-" + randomHex(b, 4)
			tree := newCgroupTree(b)
			root := filepath.Join(sysCgroup, hierarchy)
			opts := ResolverOptions{KubeletCgroupRoot: top}
			if hierarchy != "pids" {
				root = filepath.Join(root, top)
				tree.mkdir(root, "")
				opts = ResolverOptions{CgroupRoot: root, Version: 2}
			} else {
				tree.mkdir(filepath.Join(root, top), "")
				root = filepath.Join(root, top)
				opts.Version = 1
			}
			tree.mkdir(filepath.Join(root, "kubepods"), "")
			tree.mkdir(filepath.Join(root, "kubepods", "burstable"), "")
			var refs []ContainerRef
			want := 0
			for i := range containers {
				uid := fmt.Sprintf("7e570000-0000-4000-8000-%012d", i)
				id := randomHex(b, 32)
				pod := filepath.Join(root, "kubepods", "burstable", "pod"+uid)
				tree.mkdir(pod, "")
				tree.mkdir(filepath.Join(pod, id), "")
				h := startTaskHelper(b, threads)
				if err := writeCgroupFile(filepath.Join(pod, id, "cgroup.procs"), strconv.Itoa(h.pid)); err != nil {
					b.Fatal(err)
				}
				want += countTasks(h.pid)
				refs = append(refs, ContainerRef{PodUID: uid, QOS: corev1.PodQOSBurstable, ContainerID: "containerd://" + id})
			}
			r, err := NewResolver("/", opts)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				got := 0
				for _, ref := range refs {
					c, err := r.Resolve(ref)
					if err != nil {
						b.Fatal(err)
					}
					tasks, err := r.ListTIDs(c)
					if err != nil {
						b.Fatal(err)
					}
					got += len(tasks)
				}
				if got < containers*(threads+1) {
					b.Fatalf("listed %d tasks, want at least %d", got, containers*(threads+1))
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(want)/float64(containers), "tasks/container")
		})
	}
}

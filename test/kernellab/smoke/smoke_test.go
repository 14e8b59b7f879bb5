// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build linux && kernellab

package smoke

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/numapref/numapref/test/kernellab/labenv"
)

// The proposed prctl, as the patched lab kernel defines it (v1/v2 of the
// series). 78 is PR_FUTEX_HASH on kernels since ~6.16, so it is issued only
// after /proc/self/sched has shown the patch's own field.
const (
	prPreferredNID    = 78
	prPreferredNIDGet = 0
	prPreferredNIDSet = 1

	// forceField is the line the patch adds to /proc/<pid>/sched: the only
	// proof that the prctl above is the preferred-node one.
	forceField     = "numa_preferred_nid_force"
	preferredField = "numa_preferred_nid"

	procRoot = "/proc"
	sysRoot  = "/sys"
)

func TestTwoNUMANodes(t *testing.T) {
	labenv.Kernel(t)
	nodeDir := filepath.Join(sysRoot, "devices/system/node")

	online, err := os.ReadFile(filepath.Join(nodeDir, "online"))
	if err != nil {
		t.Fatalf("reading online nodes: %v", err)
	}
	if got := strings.TrimSpace(string(online)); got != "0-1" {
		t.Errorf("online nodes = %q, want \"0-1\"", got)
	}

	dirs, err := filepath.Glob(filepath.Join(nodeDir, "node[0-9]*"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, d := range dirs {
		names = append(names, filepath.Base(d))
	}
	slices.Sort(names)
	if want := []string{"node0", "node1"}; !slices.Equal(names, want) {
		t.Errorf("node directories = %v, want %v", names, want)
	}
	for _, n := range names {
		cpus, _ := os.ReadFile(filepath.Join(nodeDir, n, "cpulist"))
		t.Logf("%s: cpus %s", n, strings.TrimSpace(string(cpus)))
	}
}

// TestKernelFeatures checks the system calls that numapref's own code needs
// and tinyconfig leaves out unless hack/kernel/config.fragment asks for them.
func TestKernelFeatures(t *testing.T) {
	labenv.Kernel(t)
	const kcmpVM = 1 // KCMP_VM in linux/kcmp.h
	tests := map[string]func() error{
		"flock (FILE_LOCKING)": func() error {
			f, err := os.CreateTemp(t.TempDir(), "lock")
			if err != nil {
				return err
			}
			defer f.Close()
			return syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		},
		"kcmp KCMP_VM (KCMP)": func() error {
			pid := uintptr(os.Getpid())
			r, _, errno := syscall.Syscall6(unix.SYS_KCMP, pid, pid, kcmpVM, 0, 0, 0)
			if errno != 0 {
				return errno
			}
			if r != 0 {
				return fmt.Errorf("kcmp of a process with itself = %d, want 0", r)
			}
			return nil
		},
		"inotify (INOTIFY_USER)": func() error {
			fd, err := syscall.InotifyInit1(syscall.IN_CLOEXEC)
			if err == nil {
				syscall.Close(fd)
			}
			return err
		},
		"pid namespaces (PID_NS)": func() error {
			_, err := os.Stat(filepath.Join(procRoot, "self/ns/pid"))
			return err
		},
		"cgroup2 cpu controller (CGROUP_SCHED)": func() error {
			b, err := os.ReadFile(filepath.Join(sysRoot, "fs/cgroup/cgroup.controllers"))
			if err != nil {
				return err
			}
			if !slices.Contains(strings.Fields(string(b)), "cpu") {
				return fmt.Errorf("cgroup.controllers = %q, want cpu among them", strings.TrimSpace(string(b)))
			}
			return nil
		},
	}
	for name, check := range tests {
		t.Run(name, func(t *testing.T) {
			if err := check(); err != nil {
				t.Error(err)
			}
		})
	}
}

func TestNUMABalancingEnabled(t *testing.T) {
	labenv.Kernel(t)
	b, err := os.ReadFile(filepath.Join(procRoot, "sys/kernel/numa_balancing"))
	if err != nil {
		t.Fatalf("reading kernel.numa_balancing: %v", err)
	}
	if got := strings.TrimSpace(string(b)); got != "1" {
		t.Errorf("kernel.numa_balancing = %s, want 1 (the lab's init enables it)", got)
	}
}

// TestCpusetSkipTracepoint tells whether the cpuset-skip series is in: it adds
// the sched_skip_cpuset_numa trace event, which 6.12 lacks.
func TestCpusetSkipTracepoint(t *testing.T) {
	kernel := labenv.Kernel(t)
	_, err := os.Stat(filepath.Join(sysRoot, "kernel/tracing/events/sched/sched_skip_cpuset_numa"))
	present := err == nil
	t.Logf("sched_skip_cpuset_numa trace event present: %v", present)
	if want := kernel == "patched"; present != want {
		t.Errorf("sched_skip_cpuset_numa present = %v on the %s kernel, want %v", present, kernel, want)
	}
}

func TestPreferredNIDSupportProof(t *testing.T) {
	kernel := labenv.Kernel(t)
	release, _ := os.ReadFile(filepath.Join(procRoot, "sys/kernel/osrelease"))
	supported := hasForceField(t)
	t.Logf("kernel %s (%s): /proc/self/sched has %s: %v", strings.TrimSpace(string(release)), kernel, forceField, supported)
	record(t, map[string]any{"test": t.Name(), "kernel": kernel, "release": strings.TrimSpace(string(release)),
		"forceField": supported})

	switch {
	case kernel == "control" && supported:
		t.Fatalf("the control kernel shows %s: it is not the unpatched kernel", forceField)
	case kernel == "control":
		t.Logf("support proof absent: prctl %d is not issued on this kernel", prPreferredNID)
	case !supported:
		t.Fatalf("the patched kernel lacks %s in /proc/self/sched", forceField)
	}
}

func TestPreferredNIDSetGet(t *testing.T) {
	kernel := labenv.Kernel(t)
	if !hasForceField(t) {
		if kernel == "control" {
			// selection: on the control kernel the support proof is absent, so the call is never made
			t.Skipf("no %s in /proc/self/sched: prctl %d is not issued", forceField, prPreferredNID)
		}
		t.Fatalf("the patched kernel lacks %s in /proc/self/sched", forceField)
	}

	// pid 0 means the calling task, which is one thread: keep this goroutine
	// on it. The thread is not unlocked, so Go discards it when the test
	// returns, together with any preference a failed step left behind.
	runtime.LockOSThread()
	defer func() {
		if err := setPreferredNID(-1); err != nil {
			t.Errorf("resetting the forced preferred node: %v", err)
		}
	}()

	steps := []struct {
		desc string
		set  *int
		want int
	}{
		{desc: "initial GET", want: -1},
		{desc: "SET 1", set: ptr(1), want: 1},
		{desc: "SET 0", set: ptr(0), want: 0},
		{desc: "SET -1 clears", set: ptr(-1), want: -1},
	}
	for _, s := range steps {
		if s.set != nil {
			if err := setPreferredNID(*s.set); err != nil {
				t.Fatalf("%s: prctl(%d, SET, 0, %d, 0): %v", s.desc, prPreferredNID, *s.set, err)
			}
		}
		got, err := getPreferredNID()
		if err != nil {
			t.Fatalf("%s: prctl(%d, GET, 0, 0, &v): %v", s.desc, prPreferredNID, err)
		}
		fields := schedFields(t, filepath.Join(procRoot, "thread-self/sched"))
		t.Logf("%s: GET = %d; /proc/thread-self/sched: %s : %s, %s : %s",
			s.desc, got, forceField, fields[forceField], preferredField, fields[preferredField])
		record(t, map[string]any{"test": t.Name(), "step": s.desc, "get": got,
			"force": fields[forceField], "preferred": fields[preferredField]})
		if got != s.want {
			t.Errorf("%s: GET = %d, want %d", s.desc, got, s.want)
		}
		if want := strconv.Itoa(s.want); fields[forceField] != want {
			t.Errorf("%s: %s : %s, want %s", s.desc, forceField, fields[forceField], want)
		}
	}
}

func ptr(v int) *int { return &v }

// record appends v as a JSON line to smoke.jsonl in KERNELLAB_REPORT_DIR,
// which the lab's init copies back to the host.
func record(t *testing.T, v any) {
	t.Helper()
	dir := os.Getenv("KERNELLAB_REPORT_DIR")
	if dir == "" {
		return
	}
	line, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("encoding a report line: %v", err)
	}
	f, err := os.OpenFile(filepath.Join(dir, "smoke.jsonl"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatalf("opening the report: %v", err)
	}
	defer f.Close()
	if _, err := f.Write(append(line, '\n')); err != nil {
		t.Fatalf("writing the report: %v", err)
	}
}

// getPreferredNID reads the calling thread's forced preferred node.
func getPreferredNID() (int, error) {
	v := int32(-12345) // a value GET never returns: proves the kernel wrote it
	_, _, errno := syscall.Syscall6(syscall.SYS_PRCTL, prPreferredNID, prPreferredNIDGet, 0, 0,
		uintptr(unsafe.Pointer(&v)), 0)
	if errno != 0 {
		return 0, errno
	}
	return int(v), nil
}

// setPreferredNID forces the calling thread's preferred node (-1: none).
func setPreferredNID(nid int) error {
	_, _, errno := syscall.Syscall6(syscall.SYS_PRCTL, prPreferredNID, prPreferredNIDSet, 0, uintptr(nid), 0, 0)
	if errno != 0 {
		return errno
	}
	return nil
}

func hasForceField(t *testing.T) bool {
	t.Helper()
	_, ok := schedFields(t, filepath.Join(procRoot, "self/sched"))[forceField]
	return ok
}

// schedFields parses the "name : value" lines of a /proc/<pid>/sched file.
func schedFields(t *testing.T, path string) map[string]string {
	t.Helper()
	fields, err := readSchedFields(path)
	if err != nil {
		t.Fatal(err)
	}
	return fields
}

func readSchedFields(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%s is missing: the kernel lacks CONFIG_SCHED_DEBUG", path)
	}
	if err != nil {
		return nil, fmt.Errorf("opening %s: %w", path, err)
	}
	defer f.Close()
	fields := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		fields[strings.TrimSpace(name)] = strings.TrimSpace(value)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	return fields, nil
}

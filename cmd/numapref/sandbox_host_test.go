// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build host && linux && (amd64 || arm64)

package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/numapref/numapref/internal/nodeagent/cgroups"
	"github.com/numapref/numapref/internal/nodeagent/desire"
	"github.com/numapref/numapref/internal/numa"
	"github.com/numapref/numapref/internal/sandbox"
	"github.com/numapref/numapref/internal/statedir"
	"github.com/numapref/numapref/internal/testutil/hostlab"
	"github.com/numapref/numapref/internal/testutil/poll"
	"github.com/numapref/numapref/internal/testutil/testenv"
)

// The agent, started with the emulated kernel, fork events and no API, confines itself:
// every thread of its process shows seccomp mode 2, its log says which calls it checked
// from inside (each refused with EPERM), and it still does its work under the filter: it
// places an emulated container's tasks from the desired state it persisted, and threads
// the container starts afterwards (the proc connector, the emulator's listener).
func TestAgentSandboxesItself(t *testing.T) {
	testenv.RequireRoot(t) // real cgroups, the proc connector, CAP_SYS_PTRACE
	a := startSandboxedAgent(t)

	poll.NoError(t, 30*time.Second, "the agent's filter", func() error {
		if err := threadsStatus(a.cmd.Process.Pid, "Seccomp:", "2"); err != nil {
			return err
		}
		if !strings.Contains(a.log(), "Seccomp filter installed") {
			return fmt.Errorf("no install in the log")
		}
		return nil
	})
	logged := a.log()
	for _, probe := range []string{"ptrace(PTRACE_ATTACH)", "process_vm_writev", "pidfd_getfd", "kill(other)", "tgkill(other)",
		"execve", "socket(AF_NETLINK, NETLINK_ROUTE)"} {
		if !strings.Contains(logged, strconv.Quote(probe)) {
			t.Errorf("the agent did not check %s from inside:\n%s", probe, logged)
		}
	}

	poll.NoError(t, 30*time.Second, "the container's tasks placed under the filter", func() error { return a.placed(0) })
	if err := a.workload.Threads(3); err != nil {
		t.Fatal(err)
	}
	poll.NoError(t, 30*time.Second, "threads started after the filter placed", func() error { return a.placed(0) })
	if err := threadsStatus(a.cmd.Process.Pid, "Seccomp:", "2"); err != nil {
		t.Errorf("after the passes: %v", err)
	}
	select {
	case <-a.exited:
		t.Fatalf("the agent exited:\n%s", a.log())
	default:
	}
	// Nothing the agent itself does was refused.
	if logged := a.log(); strings.Contains(logged, unix.EPERM.Error()) {
		t.Errorf("the agent's log shows a refused call:\n%s", logged)
	}
	// The emulated kernel needs ptrace access to other processes (kcmp): no Landlock, and
	// the log says why.
	if !strings.Contains(logged, "Landlock ruleset not applied") || !strings.Contains(logged, "kcmp") {
		t.Errorf("the agent does not say why it has no Landlock ruleset:\n%s", logged)
	}
}

// Where the agent sets nothing (-kernel=auto on a kernel without the patch, as this
// machine's) it is confined by Landlock as well: it says so, with what it checked from
// inside (listing /, binding a port it has no rule for), every thread shows the seccomp
// filter, and it runs as before: it serves its health probe, and nothing it does is
// refused.
func TestAgentLandlocksItselfWhereItSetsNothing(t *testing.T) {
	testenv.RequireRoot(t)
	abi := sandbox.LandlockABI()
	testenv.Require(t, abi >= 4, fmt.Sprintf("Landlock ABI 4 or later (the kernel offers %d)", abi), "a kernel with Landlock enabled (lsm=...,landlock)")
	testenv.Require(t, !kernelHasThePatch("/proc"), "a kernel without the PR_PREFERRED_NID patch", "the host tier on a mainline kernel")
	dir := t.TempDir()
	a := startOfflineAgent(t, dir, filepath.Join(dir, "lib", "numapref", "state"), "agent")
	poll.True(t, 30*time.Second, "the agent logs its Landlock ruleset", func() bool { return strings.Contains(a.log(), "Landlock ruleset") })
	logged := a.log()
	testenv.Require(t, !strings.Contains(logged, "built with cgo"), "an agent built without cgo (before Landlock ABI 8 a ruleset is enforced on each thread, which the Go runtime can only do without cgo)",
		"CGO_ENABLED=0 go test -tags host ./cmd/numapref/, as the image is built")
	if !strings.Contains(logged, "Landlock ruleset applied") {
		t.Fatalf("the agent is not confined by Landlock:\n%s", logged)
	}
	for _, probe := range []string{`"list /"`, `"bind(127.0.0.1:0)"`, "filesystem, tcp"} {
		if !strings.Contains(logged, probe) {
			t.Errorf("the agent's log lacks %s:\n%s", probe, logged)
		}
	}
	poll.True(t, 30*time.Second, "the confined agent answers its health probe", a.healthy)
	if err := threadsStatus(a.cmd.Process.Pid, "Seccomp:", "2"); err != nil {
		t.Error(err)
	}
	if logged := a.log(); strings.Contains(logged, unix.EACCES.Error()) || strings.Contains(logged, unix.EPERM.Error()) {
		t.Errorf("the agent's log shows a refused call:\n%s", logged)
	}
	select {
	case <-a.exited:
		t.Fatalf("the agent exited (%v):\n%s", a.waitErr, a.log())
	default:
	}
}

type sandboxedAgent struct {
	*agentRun
	workload *hostlab.Workload
	emuDir   string
}

// placed checks that every task of the workload holds node in the emulated kernel.
func (a *sandboxedAgent) placed(node int) error {
	tids, err := a.workload.TIDs()
	if err != nil {
		return err
	}
	taskDir := filepath.Join(a.emuDir, "proc", strconv.Itoa(a.workload.Pid()), "task")
	for _, tid := range tids {
		s, err := numa.ReadSchedNUMA(taskDir, tid)
		if err != nil {
			return fmt.Errorf("task %d not placed yet: %w", tid, err)
		}
		if s.PreferredNIDForce != node {
			return fmt.Errorf("task %d holds %d, want %d", tid, s.PreferredNIDForce, node)
		}
	}
	return nil
}

// startSandboxedAgent makes a container with a workload, persists a desired state that
// puts it on node 0, and starts the agent on it with the filter (the default).
func startSandboxedAgent(t *testing.T, extraArgs ...string) *sandboxedAgent {
	t.Helper()
	lab, err := hostlab.New("/sys/fs/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lab.Close() })
	uid := "51515151-2222-3333-4444-555555555555"
	c, err := lab.Container(corev1.PodQOSGuaranteed, uid, strings.Repeat("5c", 32))
	if err != nil {
		t.Fatal(err)
	}
	w, err := c.StartWorkload(2)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	dir := t.TempDir()
	stateDir := filepath.Join(dir, "state")
	writeDesired(t, stateDir, desire.Desire{
		Pod: types.NamespacedName{Namespace: "ns", Name: "sandboxed"}, PodUID: types.UID(uid), Container: "app",
		Ref:  cgroups.ContainerRef{PodUID: uid, QOS: corev1.PodQOSGuaranteed, ContainerID: c.ContainerID},
		Node: 0,
	})
	a := &sandboxedAgent{workload: w, emuDir: filepath.Join(dir, "emulator")}
	args := append([]string{"-node-name", "sandboxed", "-kubeconfig", unreachableKubeconfig(t, dir),
		"-kernel", "emulated", "-emulator-state-dir", a.emuDir, "-state-dir", stateDir,
		"-cgroup-driver", "cgroupfs", "-kubelet-cgroup-root", lab.KubeletCgroupRoot(), "-rescan-interval", "1s",
		"-metrics-bind-address", "0", "-health-probe-bind-address", freePort(t), "-leader-elect=false"}, extraArgs...)
	a.agentRun = startAgentRun(t, filepath.Join(dir, "agent.log"), args...)
	return a
}

// writeDesired persists a desired state as the agent's engine writes it (desired.json).
func writeDesired(t *testing.T, stateDir string, desires ...desire.Desire) {
	t.Helper()
	data, err := json.Marshal(struct {
		Version int             `json:"version"`
		Desires []desire.Desire `json:"desires"`
	}{1, desires})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(statedir.New(stateDir).Desired(), data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// threadsStatus checks a line of /proc/<pid>/task/*/status on every thread of pid.
func threadsStatus(pid int, key, want string) error {
	paths, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/status", pid))
	if err != nil || len(paths) == 0 {
		return fmt.Errorf("listing the threads of %d: %v", pid, err)
	}
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for line := range strings.Lines(string(data)) {
			if value, ok := strings.CutPrefix(line, key); ok && strings.TrimSpace(value) != want {
				return fmt.Errorf("%s: %s %s, want %s", p, key, strings.TrimSpace(value), want)
			}
		}
	}
	return nil
}

// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build host && linux

package main

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/numapref/numapref/internal/statedir"
	"github.com/numapref/numapref/internal/testutil/nriruntime"
	"github.com/numapref/numapref/internal/testutil/poll"
	"github.com/numapref/numapref/internal/testutil/testenv"
)

// An agent started while the apiserver is unreachable must not exit: it serves its health
// endpoint and keeps running (its engine enforces the desired state it persisted; the
// controllers wait for their caches) and says the API does not answer. Here nothing
// listens where the kubeconfig points.
func TestAgentStartsWithoutTheAPI(t *testing.T) {
	dir := t.TempDir()
	a := startOfflineAgent(t, dir, filepath.Join(dir, "state"), "agent")
	deadline := time.Now().Add(30 * time.Second)
	for !a.healthy() {
		select {
		case <-a.exited:
			t.Fatalf("the agent exited without the API (%v):\n%s", a.waitErr, a.log())
		case <-time.After(50 * time.Millisecond): // poll interval
		}
		if time.Now().After(deadline) {
			t.Fatalf("the agent never served /healthz:\n%s", a.log())
		}
	}
	// Still running a while later (the controllers' caches cannot sync).
	select {
	case <-a.exited:
		t.Fatalf("the agent exited without the API (%v):\n%s", a.waitErr, a.log())
	case <-time.After(3 * time.Second):
	}
	if !a.healthy() {
		t.Errorf("the agent stopped serving /healthz:\n%s", a.log())
	}
	// It knows: containers placed at their start keep their placement meanwhile.
	poll.True(t, 30*time.Second, "the agent says the API does not answer", func() bool {
		return strings.Contains(a.log(), "The API server does not answer")
	})
}

// With -nri-socket the agent registers with the container runtime's NRI as a plugin, in
// its sandbox (seccomp), before the API answers.
func TestAgentRegistersWithNRI(t *testing.T) {
	dir := t.TempDir()
	r := nriruntime.Start(t)
	a := startOfflineAgent(t, dir, filepath.Join(dir, "state"), "agent", "-nri-socket", r.Socket)
	r.WaitPlugin()
	if !a.healthy() {
		t.Errorf("the agent registered with NRI but does not serve /healthz:\n%s", a.log())
	}
}

// Two agents on one state dir: the second waits for the first, says so at once and whom
// it waits for, runs nothing meanwhile (its "Starting" line comes after the lock) but
// answers its health probes, and takes over when the first dies, however it dies.
func TestOneAgentPerStateDir(t *testing.T) {
	for name, sig := range map[string]syscall.Signal{"SIGTERM": syscall.SIGTERM, "SIGKILL": syscall.SIGKILL} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			state := filepath.Join(dir, "state")
			first := startOfflineAgent(t, dir, state, "first")
			poll.True(t, time.Minute, "the first agent holds the state dir", func() bool {
				return strings.Contains(first.log(), "Holding the state dir") && lockHolder(state) == first.cmd.Process.Pid
			})
			second := startOfflineAgent(t, dir, state, "second")
			waiting := fmt.Sprintf(`"holderPID":%d`, first.cmd.Process.Pid)
			poll.True(t, time.Minute, "the second agent says it waits for the first", func() bool {
				return strings.Contains(second.log(), "Waiting for the state dir") && strings.Contains(second.log(), waiting)
			})
			poll.True(t, 30*time.Second, "the waiting agent answers its health probe", second.healthy)
			if log := second.log(); strings.Contains(log, `"msg":"Starting"`) || strings.Contains(log, "Holding the state dir") {
				t.Fatalf("the second agent started while the first holds the dir:\n%s", log)
			}
			if err := first.cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			<-first.exited
			poll.True(t, time.Minute, "the second agent takes over", func() bool {
				return strings.Contains(second.log(), `"msg":"Starting"`) && lockHolder(state) == second.cmd.Process.Pid
			})
			select {
			case <-second.exited:
				t.Fatalf("the second agent exited (%v):\n%s", second.waitErr, second.log())
			default:
			}
		})
	}
}

// lockHolder is the pid the state dir's lock file names, 0 if none.
func lockHolder(stateDir string) int {
	data, err := os.ReadFile(statedir.New(stateDir).Lock())
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(data)))
	return pid
}

// agentRun is a numapref agent process a test started: its command, its log, its exit.
type agentRun struct {
	cmd     *exec.Cmd
	logPath string
	exited  chan struct{}
	waitErr error // set once exited is closed
}

func (a *agentRun) log() string { data, _ := os.ReadFile(a.logPath); return string(data) }

// startAgentRun runs this test binary as the agent with args, its output in logPath. It is
// killed and waited for when the test ends, and its log shown if the test failed.
func startAgentRun(t *testing.T, logPath string, args ...string) *agentRun {
	t.Helper()
	a := &agentRun{cmd: exec.Command(os.Args[0], append([]string{"agent"}, args...)...), logPath: logPath, exited: make(chan struct{})}
	a.cmd.Env = append(os.Environ(), "NUMAPREF_RUN_MAIN=1")
	a.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { out.Close() })
	a.cmd.Stdout, a.cmd.Stderr = out, out
	if err := a.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { a.waitErr = a.cmd.Wait(); close(a.exited) }()
	t.Cleanup(func() {
		_ = a.cmd.Process.Kill()
		<-a.exited
		if t.Failed() {
			t.Logf("agent log (%s):\n%s", logPath, a.log())
		}
	})
	return a
}

// agentProcess is an agent without the API, with its health probe.
type agentProcess struct {
	*agentRun
	health string
}

func (a *agentProcess) healthy() bool {
	resp, err := http.Get("http://" + a.health + "/healthz")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// startOfflineAgent runs an agent whose kubeconfig points where nothing listens, with
// state dir state, its log in dir/<name>.log, and extra arguments; it is killed when the
// test ends.
func startOfflineAgent(t *testing.T, dir, state, name string, extra ...string) *agentProcess {
	t.Helper()
	health := freePort(t)
	return &agentProcess{health: health, agentRun: startAgentRun(t, filepath.Join(dir, name+".log"), append([]string{
		"-node-name", "offline", "-kubeconfig", unreachableKubeconfig(t, dir),
		"-state-dir", state, "-cgroup-driver", "cgroupfs", "-fork-events=false", "-metrics-bind-address", "0",
		"-health-probe-bind-address", health, "-leader-election-namespace", "numapref-system", "-pod-name", ""}, extra...)...)}
}

// freePort returns a local address nothing listens on now.
func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return fmt.Sprintf("127.0.0.1:%d", l.Addr().(*net.TCPAddr).Port)
}

// unreachableKubeconfig writes a new kubeconfig file in dir that points at a port nothing
// listens on. A file per call: a second agent's kubeconfig, written over the first's while
// the first reads it, gave the first an empty one ("no configuration has been provided").
func unreachableKubeconfig(t *testing.T, dir string) string {
	t.Helper()
	f, err := os.CreateTemp(dir, "kubeconfig-*")
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.WriteString(testenv.UnreachableKubeconfig)
	if err = errors.Join(err, f.Close()); err != nil {
		t.Fatal(err)
	}
	return f.Name()
}

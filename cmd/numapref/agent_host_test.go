//go:build host && linux

package main

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// An agent started while the apiserver is unreachable must not exit: it serves its health
// endpoint and keeps running (its engine enforces the desired state it persisted; the
// controllers wait for their caches). Here nothing listens where the kubeconfig points.
func TestAgentStartsWithoutTheAPI(t *testing.T) {
	dir := t.TempDir()
	kubeconfig := unreachableKubeconfig(t, dir)
	health := freePort(t)
	cmd := exec.Command(os.Args[0], "agent", "-node-name", "offline", "-kubeconfig", kubeconfig,
		"-state-dir", filepath.Join(dir, "state"), "-cgroup-driver", "cgroupfs", "-fork-events=false", "-metrics-bind-address", "0",
		"-health-probe-bind-address", health, "-leader-election-namespace", "numapref-system")
	cmd.Env = append(os.Environ(), "NUMAPREF_RUN_MAIN=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := os.Create(filepath.Join(dir, "agent.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	cmd.Stdout, cmd.Stderr = out, out
	log := func() string { data, _ := os.ReadFile(out.Name()); return string(data) }
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(exited) }()
	defer func() {
		cmd.Process.Kill()
		<-exited
	}()

	healthy := func() bool {
		resp, err := http.Get("http://" + health + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}
	deadline := time.Now().Add(30 * time.Second)
	for !healthy() {
		select {
		case <-exited:
			t.Fatalf("the agent exited without the API (%v):\n%s", waitErr, log())
		case <-time.After(50 * time.Millisecond): // poll interval
		}
		if time.Now().After(deadline) {
			t.Fatalf("the agent never served /healthz:\n%s", log())
		}
	}
	// Still running a while later (the controllers' caches cannot sync).
	select {
	case <-exited:
		t.Fatalf("the agent exited without the API (%v):\n%s", waitErr, log())
	case <-time.After(3 * time.Second):
	}
	if !healthy() {
		t.Errorf("the agent stopped serving /healthz:\n%s", log())
	}
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

// unreachableKubeconfig points at a port nothing listens on.
func unreachableKubeconfig(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(path, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1", insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

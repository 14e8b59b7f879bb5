// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build linux

package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
	"github.com/numapref/numapref/internal/testutil/hostlab"
	"github.com/numapref/numapref/internal/testutil/poll"
)

// agent is the agent binary running as a child process.
type agent struct {
	cmd    *exec.Cmd
	log    string
	exited chan error
	start  time.Time
}

// startAgent writes an admin kubeconfig for the envtest apiserver and starts the agent for
// the node, as the chart's DaemonSet runs it: secure metrics (a self-signed certificate),
// fork events, its own pod given so that it watches its DaemonSet.
func startAgent(env *envtest.Environment, path, dir string, o options) (*agent, error) {
	user, err := env.AddUser(envtest.User{Name: "footprint-agent", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return nil, fmt.Errorf("adding the agent's user: %w", err)
	}
	kubeconfig, err := user.KubeConfig()
	if err != nil {
		return nil, err
	}
	kubeconfigPath := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfigPath, kubeconfig, 0o600); err != nil {
		return nil, err
	}
	a := &agent{log: filepath.Join(dir, "agent.log"), exited: make(chan error, 1)}
	out, err := os.Create(a.log)
	if err != nil {
		return nil, err
	}
	defer out.Close()
	args := []string{"agent", "-node-name", nodeName, "-kubeconfig", kubeconfigPath,
		"-kernel", o.kernel, "-emulator-state-dir", filepath.Join(dir, "emulator"), "-state-dir", filepath.Join(dir, "state"),
		"-cgroup-driver", "cgroupfs", "-rescan-interval", o.rescan.String(), "-pod-name", agentName + "-0", "-pod-namespace", namespace,
		// Ports the kernel picks: nothing here connects to them.
		"-metrics-bind-address", "127.0.0.1:0", "-health-probe-bind-address", "127.0.0.1:0"}
	if o.profile != "" {
		args = append(args, "-profile", o.profile)
	}
	a.cmd = exec.Command(path, args...)
	a.cmd.Stdout, a.cmd.Stderr = out, out
	if err := a.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting the agent: %w", err)
	}
	a.start = time.Now()
	go func() { a.exited <- a.cmd.Wait() }()
	return a, nil
}

// stop ends the agent with SIGTERM (a clean exit), then SIGKILL after 30 s.
func (a *agent) stop() error {
	_ = a.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-a.exited:
		_ = err // by the signal, or its exit status after a clean shutdown: stopped either way
		return nil
	case <-time.After(30 * time.Second):
		_ = a.cmd.Process.Kill()
		if err := <-a.exited; err != nil {
			return fmt.Errorf("the agent did not stop within 30s of SIGTERM; killed: %w", err)
		}
		return errors.New("the agent did not stop within 30s of SIGTERM; killed")
	}
}

// alive says why the agent is not running any more, with its log's tail.
func (a *agent) alive() error {
	select {
	case err := <-a.exited:
		a.exited <- err // for stop
		return fmt.Errorf("the agent exited (%v); log:\n%s", err, tail(a.log))
	default:
		return nil
	}
}

// waitReported waits until the agent's NumaNodeReport counts every pod and it has written
// its Event about each, and returns how long after its start that was.
func waitReported(ctx context.Context, c client.Client, a *agent, pods int) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	var exited error
	err := poll.Context(ctx, 200*time.Millisecond, func() error {
		if exited = a.alive(); exited != nil {
			cancel() // no point in waiting longer
			return exited
		}
		var report numav1.NumaNodeReport
		if err := c.Get(ctx, client.ObjectKey{Name: nodeName}, &report); err != nil {
			return fmt.Errorf("reading the node report: %w", err)
		}
		if got := report.Status.Totals.Pods; int(got) != pods {
			return fmt.Errorf("the node report counts %d pods of %d", got, pods)
		}
		// Each pod gets one Warning (ContainerNotFound: no container runs here), sent
		// through the client's rate limiter: once all are written, the start's burst is over.
		var events eventsv1.EventList
		if err := c.List(ctx, &events, client.InNamespace(namespace)); err != nil {
			return fmt.Errorf("listing Events: %w", err)
		}
		if len(events.Items) < pods {
			return fmt.Errorf("%d Events of %d pods written", len(events.Items), pods)
		}
		return nil
	})
	if exited != nil {
		return 0, exited
	}
	if err != nil {
		return 0, fmt.Errorf("waiting for the agent to report every pod: %w; log:\n%s", err, tail(a.log))
	}
	return time.Since(a.start), nil
}

// window is what sampleWindow saw: the last sample, the samples' mean (the heap's part
// moves by a MiB or more with the collector's cycle), the largest VmRSS, and the agent's CPU
// time over the window (GC included: its cost is what a smaller heap trades for).
type window struct {
	last    hostlab.Memory // KiB
	mean    hostlab.Memory
	peak    uint64
	cpu     time.Duration
	elapsed time.Duration
}

// sampleWindow reads the agent's memory o.samples times, evenly over o.window.
func sampleWindow(ctx context.Context, a *agent, o options) (w window, err error) {
	pid := a.cmd.Process.Pid
	cpu0, err := hostlab.ProcessCPU(pid)
	if err != nil {
		return w, err
	}
	start := time.Now()
	tick := time.NewTicker(o.window / time.Duration(o.samples))
	defer tick.Stop()
	for range o.samples {
		select {
		case <-ctx.Done():
			return w, ctx.Err()
		case <-tick.C:
		}
		if err := a.alive(); err != nil {
			return w, err
		}
		if w.last, err = hostlab.ProcessMemory(pid); err != nil {
			return w, err
		}
		w.peak = max(w.peak, w.last.RSS)
		w.mean.RSS, w.mean.Anon, w.mean.File = w.mean.RSS+w.last.RSS, w.mean.Anon+w.last.Anon, w.mean.File+w.last.File
	}
	n := uint64(o.samples)
	w.mean = hostlab.Memory{RSS: w.mean.RSS / n, Anon: w.mean.Anon / n, File: w.mean.File / n}
	cpu1, err := hostlab.ProcessCPU(pid)
	w.cpu, w.elapsed = cpu1-cpu0, time.Since(start)
	return w, err
}

// tail is the end of the agent's log, for an error.
func tail(path string) string {
	data, _ := os.ReadFile(path)
	if len(data) > 4000 {
		data = data[len(data)-4000:]
	}
	return string(data)
}

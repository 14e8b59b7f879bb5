// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build linux

// Command footprint measures the node agent's memory at a given number of selected pods
// (BENCHMARKS.md, "Memory"): it starts a throwaway kube-apiserver and etcd
// (envtest, KUBEBUILDER_ASSETS) with the project's CRDs, creates a Node, -pods pods bound
// to it that look Running (they exist only in the API: no container runs) and a
// NumaPreference that selects them, writes an admin kubeconfig, and runs the real agent
// binary as a child process for that node, with a state dir and an emulated kernel of its
// own. Once the agent's NumaNodeReport counts every pod and its Event about each pod is
// written (the start's burst is over), it samples VmRSS, RssAnon and RssFile of
// /proc/<pid>/status -samples times over -window and prints one line with the samples'
// mean, the last sample, the largest VmRSS, the agent's CPU over the window and the
// binary's size. Run from the module root, as root (the agent's fork events and seccomp
// filter); the agent inherits the environment (GOGC, GODEBUG=gctrace=1):
//
//	CGO_ENABLED=0 go build -trimpath -o /tmp/numapref ./cmd/numapref
//	KUBEBUILDER_ASSETS=... nice -n 5 go run ./test/footprint -agent /tmp/numapref [-pods 110] [-window 30s]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
)

type options struct {
	agent   string
	pods    int
	window  time.Duration
	samples int
	kernel  string
	rescan  time.Duration
	keep    bool
	profile string
}

func main() {
	var o options
	flag.StringVar(&o.agent, "agent", "", "the agent binary (CGO_ENABLED=0 go build -trimpath -o /tmp/numapref ./cmd/numapref)")
	flag.IntVar(&o.pods, "pods", 110, "selected pods bound to the agent's node")
	flag.DurationVar(&o.window, "window", 30*time.Second, "how long the samples are spread over, once every pod is reported")
	flag.IntVar(&o.samples, "samples", 6, "samples of /proc/<pid>/status over the window")
	flag.StringVar(&o.kernel, "kernel", "emulated", "the agent's -kernel")
	flag.DurationVar(&o.rescan, "rescan", 10*time.Second, "the agent's -rescan-interval")
	flag.StringVar(&o.profile, "profile", "", "the agent's -profile: its CPU profile to <path>.cpu and its allocations (and the heap in use) to <path>.allocs, written when it is stopped at the end")
	flag.BoolVar(&o.keep, "keep", false, "after the figures, keep the agent running until interrupted (for a closer look at its /proc/<pid>/smaps)")
	flag.Parse()
	if o.agent == "" || o.pods < 1 || o.samples < 1 {
		fmt.Fprintln(os.Stderr, "footprint: -agent is required; -pods and -samples must be at least 1")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "footprint:", err)
		stop()
		os.Exit(1)
	}
}

const nodeName = "footprint-node"

func run(ctx context.Context, o options) (err error) { //nolint:funlen // measurement tooling: the footprint run's steps in order
	agentPath, err := filepath.Abs(o.agent)
	if err != nil {
		return err
	}
	info, err := os.Stat(agentPath)
	if err != nil {
		return fmt.Errorf("the agent binary: %w", err)
	}
	scheme := k8sruntime.NewScheme()
	if err := errors.Join(corev1.AddToScheme(scheme), appsv1.AddToScheme(scheme), eventsv1.AddToScheme(scheme), numav1.AddToScheme(scheme)); err != nil {
		return err
	}
	env := &envtest.Environment{CRDDirectoryPaths: []string{filepath.Join("config", "crd", "bases")}, ErrorIfCRDPathMissing: true}
	cfg, err := env.Start()
	if err != nil {
		return fmt.Errorf("starting envtest (KUBEBUILDER_ASSETS, run from the module root): %w", err)
	}
	defer func() { err = errors.Join(err, env.Stop()) }()
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	if err := createWorld(ctx, c, o.pods); err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "footprint-")
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, os.RemoveAll(dir)) }()
	a, err := startAgent(env, agentPath, dir, o)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, a.stop()) }()
	reported, err := waitReported(ctx, c, a, o.pods)
	if err != nil {
		return err
	}
	w, err := sampleWindow(ctx, a, o)
	if err != nil {
		return err
	}
	fmt.Printf("footprint: %d pods reported, and their Events written, %s after the agent started; over %s (%d samples): mean VmRSS %.1f MiB (last %.1f, max %.1f), RssAnon %.1f MiB (last %.1f), RssFile %.1f MiB (last %.1f), CPU %.1f ms/s; binary %.1f MB (%s)\n",
		o.pods, reported.Round(time.Millisecond), o.window, o.samples, mib(w.mean.RSS), mib(w.last.RSS), mib(w.peak), mib(w.mean.Anon), mib(w.last.Anon), mib(w.mean.File), mib(w.last.File),
		float64(w.cpu.Milliseconds())/w.elapsed.Seconds(), float64(info.Size())/1e6, o.agent)
	if o.keep {
		fmt.Printf("agent pid %d kept running; interrupt to stop\n", a.cmd.Process.Pid)
		<-ctx.Done()
	}
	return nil
}

func mib(kib uint64) float64 { return float64(kib) / 1024 }

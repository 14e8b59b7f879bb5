// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build linux

// Command cachecost measures what a tenant's NumaPreferences cost the processes that cache
// them (BENCHMARKS.md, "NumaPreferences per namespace"): it starts a throwaway kube-apiserver
// and etcd (envtest, KUBEBUILDER_ASSETS) with the project's CRDs, creates -n of the largest
// valid NumaPreferences (internal/testutil/largest) in one namespace, each with an
// annotation of -annotation-bytes (the API takes 256 KiB of annotations at most), then
// starts the real agent binary for a Node and the real summarizer binary, both with
// -max-preferences-per-namespace=-cap. Once the summarizer has judged every preference
// (each has a Ready condition) it samples VmRSS of both processes -samples times over
// -window and prints one line each: the mean and the largest VmRSS, and VmHWM (the peak
// since start, which the initial list sets). Run from the module root, as root (the
// agent's state dir, emulated kernel and fork events):
//
//	CGO_ENABLED=0 go build -trimpath -o /tmp/numapref ./cmd/numapref
//	KUBEBUILDER_ASSETS=$(hack/k8s-binaries.sh) go run ./test/cachecost -binary /tmp/numapref -n 1000 [-annotation-bytes 250000] [-cap 128]
//
// -watchlist=false sets KUBE_FEATURE_WatchListClient=false in both processes: their initial
// list then arrives whole, as from an apiserver without streaming lists (1.33 and before).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
	"github.com/numapref/numapref/internal/testutil/largest"
	"github.com/numapref/numapref/internal/testutil/poll"
)

type options struct {
	binary          string
	n, annotation   int
	capPerNamespace int
	watchList       bool
	samples         int
	window, timeout time.Duration
}

func main() {
	var o options
	flag.StringVar(&o.binary, "binary", "", "the numapref binary (CGO_ENABLED=0 go build -trimpath -o /tmp/numapref ./cmd/numapref)")
	flag.IntVar(&o.n, "n", 1000, "NumaPreferences to create in one namespace")
	flag.IntVar(&o.annotation, "annotation-bytes", 0, "size of an annotation on each (at most 262,144 less the key)")
	flag.IntVar(&o.capPerNamespace, "cap", 128, "-max-preferences-per-namespace of both processes (0: no cap; -1: no such flag, for a binary from before it)")
	flag.BoolVar(&o.watchList, "watchlist", true, "false: the processes list without streaming (KUBE_FEATURE_WatchListClient=false)")
	flag.IntVar(&o.samples, "samples", 5, "samples of VmRSS")
	flag.DurationVar(&o.window, "window", 10*time.Second, "how long the samples are spread over")
	flag.DurationVar(&o.timeout, "timeout", 20*time.Minute, "how long to wait for the summarizer to judge every preference")
	flag.Parse()
	if o.binary == "" || o.n < 1 {
		fmt.Fprintln(os.Stderr, "cachecost: -binary is required, -n must be at least 1")
		os.Exit(2)
	}
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "cachecost:", err)
		os.Exit(1)
	}
}

const (
	tenant = "tenant"
	node   = "cachecost-node"
)

func run(o options) (err error) { //nolint:funlen // measurement tooling: the run's steps in order
	binary, err := filepath.Abs(o.binary)
	if err != nil {
		return err
	}
	scheme := k8sruntime.NewScheme()
	if err := errors.Join(clientgoscheme.AddToScheme(scheme), numav1.AddToScheme(scheme)); err != nil {
		return err
	}
	env := &envtest.Environment{CRDDirectoryPaths: []string{filepath.Join("config", "crd", "bases")}, ErrorIfCRDPathMissing: true}
	// 10,000 objects of 280 KB are 2.8 GB: past etcd's default backend quota of 2 GiB.
	env.ControlPlane.Etcd = &envtest.Etcd{}
	env.ControlPlane.Etcd.Configure().Set("quota-backend-bytes", strconv.Itoa(8<<30))
	cfg, err := env.Start()
	if err != nil {
		return fmt.Errorf("starting envtest (KUBEBUILDER_ASSETS, run from the module root): %w", err)
	}
	defer func() { err = errors.Join(err, env.Stop()) }()
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	ctx := context.Background()
	start := time.Now()
	if err := createWorld(ctx, c, o); err != nil {
		return err
	}
	fmt.Printf("cachecost: %d NumaPreferences with %d-byte annotations created in %s\n", o.n, o.annotation, time.Since(start).Round(time.Second))

	dir, err := os.MkdirTemp("", "cachecost-")
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, os.RemoveAll(dir)) }()
	kubeconfig, err := writeKubeconfig(env, dir)
	if err != nil {
		return err
	}
	var capFlag []string
	if o.capPerNamespace >= 0 {
		capFlag = []string{"-max-preferences-per-namespace=" + strconv.Itoa(o.capPerNamespace)}
	}
	summarizer, err := startProcess(o, dir, "summarizer", binary, append([]string{"summarizer", "-kubeconfig", kubeconfig,
		"-leader-election-namespace", "default", "-health-probe-bind-address", "127.0.0.1:0"}, capFlag...)...)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, summarizer.stop()) }()
	agent, err := startProcess(o, dir, "agent", binary, append([]string{"agent", "-node-name", node, "-kubeconfig", kubeconfig,
		"-kernel", "emulated", "-emulator-state-dir", filepath.Join(dir, "emulator"), "-state-dir", filepath.Join(dir, "state"),
		"-cgroup-driver", "cgroupfs", "-metrics-bind-address", "127.0.0.1:0", "-health-probe-bind-address", "127.0.0.1:0"}, capFlag...)...)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, agent.stop()) }()

	judged := time.Now()
	if err := waitJudged(ctx, c, o, agent, summarizer); err != nil {
		return err
	}
	fmt.Printf("cachecost: every preference judged %s after the processes started\n", time.Since(judged).Round(time.Second))
	for _, p := range []*process{agent, summarizer} {
		s, err := p.sample(o)
		if err != nil {
			return err
		}
		fmt.Printf("cachecost: %-10s n=%d annotation=%d cap=%d watchlist=%v: VmRSS mean %.1f MiB, max %.1f MiB; VmHWM %.1f MiB\n",
			p.name, o.n, o.annotation, o.capPerNamespace, o.watchList, mib(s.mean), mib(s.max), mib(s.hwm))
	}
	return nil
}

// createWorld makes the tenant's namespace, the agent's Node and n of the largest
// preferences, 8 at a time.
func createWorld(ctx context.Context, c client.Client, o options) error {
	for _, obj := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: tenant}},
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}},
	} {
		if err := c.Create(ctx, obj); err != nil {
			return fmt.Errorf("creating %s: %w", obj.GetName(), err)
		}
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(8)
	for i := range o.n {
		g.Go(func() error {
			p := largest.NumaPreference(tenant, i)
			if o.annotation > 0 {
				p.Annotations = map[string]string{"example.com/notes": strings.Repeat("a", o.annotation)}
			}
			if err := c.Create(gctx, p); err != nil {
				return fmt.Errorf("creating preference %d: %w", i, err)
			}
			return nil
		})
	}
	return g.Wait()
}

// waitJudged waits until every preference has a Ready condition (the summarizer's: within
// the cap NoMatchingPods, past it TooManyPreferences), the processes still running.
func waitJudged(ctx context.Context, c client.Client, o options, procs ...*process) error {
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	return poll.Context(ctx, 2*time.Second, func() error {
		for _, p := range procs {
			if err := p.alive(); err != nil {
				cancel()
				return err
			}
		}
		// In pages, and only until the first unjudged one: a whole list of 10,000 objects
		// of 256 KiB is 2.6 GB, which would load the apiserver and this process more than
		// the processes measured.
		judged, cont := 0, ""
		for {
			var list numav1.NumaPreferenceList
			if err := c.List(ctx, &list, client.InNamespace(tenant), client.Limit(100), client.Continue(cont)); err != nil {
				return err
			}
			for i := range list.Items {
				if meta.FindStatusCondition(list.Items[i].Status.Conditions, numav1.ConditionReady) == nil {
					return fmt.Errorf("%s not judged yet (%d before it judged)", list.Items[i].Name, judged)
				}
				judged++
			}
			if cont = list.Continue; cont == "" {
				break
			}
		}
		if judged < o.n {
			return fmt.Errorf("%d of %d preferences judged", judged, o.n)
		}
		return nil
	})
}

// process is a child: the agent or the summarizer.
type process struct {
	name   string
	cmd    *exec.Cmd
	log    string
	exited chan error
}

func startProcess(o options, dir, name, binary string, args ...string) (*process, error) {
	p := &process{name: name, log: filepath.Join(dir, name+".log"), exited: make(chan error, 1)}
	out, err := os.Create(p.log)
	if err != nil {
		return nil, err
	}
	defer out.Close()
	p.cmd = exec.Command(binary, args...)
	p.cmd.Stdout, p.cmd.Stderr = out, out
	p.cmd.Env = os.Environ()
	if !o.watchList {
		p.cmd.Env = append(p.cmd.Env, "KUBE_FEATURE_WatchListClient=false")
	}
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting the %s: %w", name, err)
	}
	go func() { p.exited <- p.cmd.Wait() }()
	return p, nil
}

func (p *process) alive() error {
	select {
	case err := <-p.exited:
		p.exited <- err
		log, _ := os.ReadFile(p.log)
		if len(log) > 4000 {
			log = log[len(log)-4000:]
		}
		return fmt.Errorf("the %s exited (%v); log:\n%s", p.name, err, log)
	default:
		return nil
	}
}

func (p *process) stop() error {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-p.exited:
		_ = err // by the signal, or its exit status after a clean shutdown: stopped either way
		return nil
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		err := <-p.exited
		return fmt.Errorf("the %s did not stop within 30s of SIGTERM; killed (%v)", p.name, err)
	}
}

// samples is what sample saw, in KiB.
type samples struct{ mean, max, hwm uint64 }

func (p *process) sample(o options) (samples, error) {
	var s samples
	var sum uint64
	for i := range o.samples {
		if i > 0 {
			time.Sleep(o.window / time.Duration(max(o.samples-1, 1)))
		}
		rss, hwm, err := memory(p.cmd.Process.Pid)
		if err != nil {
			return s, err
		}
		sum += rss
		s.max, s.hwm = max(s.max, rss), hwm
	}
	s.mean = sum / uint64(o.samples)
	return s, nil
}

// memory reads VmRSS and VmHWM of pid, in KiB.
func memory(pid int) (rss, hwm uint64, err error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	for line := range strings.Lines(string(data)) {
		f := strings.Fields(line)
		if len(f) != 3 {
			continue
		}
		switch f[0] {
		case "VmRSS:":
			rss, err = strconv.ParseUint(f[1], 10, 64)
		case "VmHWM:":
			hwm, err = strconv.ParseUint(f[1], 10, 64)
		}
		if err != nil {
			return 0, 0, err
		}
	}
	return rss, hwm, nil
}

// writeKubeconfig writes an admin kubeconfig of env into dir.
func writeKubeconfig(env *envtest.Environment, dir string) (string, error) {
	user, err := env.AddUser(envtest.User{Name: "cachecost", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return "", fmt.Errorf("adding the processes' user: %w", err)
	}
	data, err := user.KubeConfig()
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, "kubeconfig")
	return path, os.WriteFile(path, data, 0o600)
}

func mib(kib uint64) float64 { return float64(kib) / 1024 }

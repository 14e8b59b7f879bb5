// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

// Command bounds measures what the largest valid NumaPreferences cost an agent's cache:
// it starts a throwaway kube-apiserver and etcd (envtest, KUBEBUILDER_ASSETS) with the
// project's CRDs, creates -n copies of the largest valid NumaPreference
// (internal/testutil/largest), then starts a cache with the agent's options
// (agent.NodeCacheOptions) and prints the heap and RSS of this process before and
// after the cache has synced.
//
//	KUBEBUILDER_ASSETS=... go run ./test/bounds [-n 1000] [-cache agent|managedfields] [-annotation-bytes B]
//
// -cache managedfields caches as agents did before the transform of NumaPreferences: only
// managedFields dropped. -annotation-bytes gives each object an annotation of that size:
// metadata that the CRD cannot bound.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
	"github.com/numapref/numapref/controllers/agent"
	"github.com/numapref/numapref/controllers/summarizer"
	"github.com/numapref/numapref/internal/testutil/largest"
)

func main() {
	n := flag.Int("n", 1000, "NumaPreferences to create")
	mode := flag.String("cache", "agent", "agent (NodeCacheOptions) or managedfields (only managedFields dropped)")
	annotation := flag.Int("annotation-bytes", 0, "size of an annotation on each object (0: none)")
	offline := flag.Bool("offline", false, "no apiserver: decode the objects' JSON as a cache would, and measure what they hold")
	flag.Parse()
	run := run
	if *offline {
		run = decodeOffline
	}
	if err := run(*n, *mode, *annotation); err != nil {
		fmt.Fprintln(os.Stderr, "bounds:", err)
		os.Exit(1)
	}
}

func run(n int, mode string, annotation int) error {
	scheme := k8sruntime.NewScheme()
	if err := errors.Join(clientgoscheme.AddToScheme(scheme), numav1.AddToScheme(scheme)); err != nil {
		return err
	}
	opts, err := cacheOptions(mode, scheme)
	if err != nil {
		return err
	}
	env := &envtest.Environment{CRDDirectoryPaths: []string{filepath.Join("config", "crd", "bases")}, ErrorIfCRDPathMissing: true}
	cfg, err := env.Start()
	if err != nil {
		return fmt.Errorf("starting envtest (KUBEBUILDER_ASSETS, run from the module root): %w", err)
	}
	defer func() { _ = env.Stop() }()
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := create(ctx, c, n, annotation); err != nil {
		return err
	}

	before := measure()
	informers, err := cache.New(cfg, opts)
	if err != nil {
		return err
	}
	if _, err := informers.GetInformer(ctx, &numav1.NumaPreference{}); err != nil {
		return err
	}
	go func() { _ = informers.Start(ctx) }()
	start := time.Now()
	if !informers.WaitForCacheSync(ctx) {
		return errors.New("the cache did not sync")
	}
	var list numav1.NumaPreferenceList
	if err := informers.List(ctx, &list); err != nil {
		return err
	}
	after := measure()
	fmt.Printf("%d NumaPreferences cached (-cache %s, annotation %d bytes), synced in %s\n", len(list.Items), mode, annotation, time.Since(start).Round(time.Millisecond))
	fmt.Printf("heap in use: %.1f MiB before, %.1f MiB after (+%.1f MiB)\n", mib(before.heap), mib(after.heap), mib(after.heap-before.heap))
	fmt.Printf("RSS:         %.1f MiB before, %.1f MiB after (+%.1f MiB)\n", mib(before.rss), mib(after.rss), mib(after.rss-before.rss))
	runtime.KeepAlive(list)
	return nil
}

// decodeOffline measures the Go objects of n decoded NumaPreferences, transformed as the
// cache mode says, without an apiserver: a lower bound of what a cache holds.
func decodeOffline(n int, mode string, annotation int) error {
	opts, err := cacheOptions(mode, k8sruntime.NewScheme())
	if err != nil {
		return err
	}
	transform := opts.DefaultTransform
	for obj, by := range opts.ByObject {
		if _, ok := obj.(*numav1.NumaPreference); ok && by.Transform != nil {
			transform = by.Transform
		}
	}
	before := measure()
	kept := make([]any, n)
	for i := range kept {
		p := largest.NumaPreference("bounds", i)
		if annotation > 0 {
			p.Annotations = map[string]string{"example.com/notes": strings.Repeat("a", annotation)}
		}
		data, err := json.Marshal(p)
		if err != nil {
			return err
		}
		var decoded numav1.NumaPreference
		if err := json.Unmarshal(data, &decoded); err != nil {
			return err
		}
		if kept[i], err = transform(&decoded); err != nil {
			return err
		}
	}
	after := measure()
	fmt.Printf("%d NumaPreferences decoded offline (-cache %s, annotation %d bytes)\n", n, mode, annotation)
	fmt.Printf("heap in use: +%.1f MiB, RSS: +%.1f MiB\n", mib(after.heap-before.heap), mib(after.rss-before.rss))
	runtime.KeepAlive(kept)
	return nil
}

func cacheOptions(mode string, scheme *k8sruntime.Scheme) (cache.Options, error) {
	var opts cache.Options
	switch mode {
	case "agent":
		opts = agent.NodeCacheOptions("node-bounds", agent.NewPreferenceCap(summarizer.DefaultMaxPerNamespace))
	case "managedfields":
		opts = cache.Options{DefaultTransform: cache.TransformStripManagedFields()}
	default:
		return cache.Options{}, fmt.Errorf("unknown -cache %q", mode)
	}
	opts.Scheme = scheme
	return opts, nil
}

// create makes n of the largest valid NumaPreferences in a namespace of their own.
func create(ctx context.Context, c client.Client, n, annotation int) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "bounds"}}
	if err := c.Create(ctx, ns); err != nil {
		return fmt.Errorf("creating namespace: %w", err)
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(8)
	for i := range n {
		g.Go(func() error {
			p := largest.NumaPreference(ns.Name, i)
			if annotation > 0 {
				p.Annotations = map[string]string{"example.com/notes": strings.Repeat("a", annotation)}
			}
			if err := c.Create(gctx, p); err != nil {
				return fmt.Errorf("creating NumaPreference %d: %w", i, err)
			}
			return nil
		})
	}
	return g.Wait()
}

type usage struct{ heap, rss uint64 }

// measure returns the heap in use after a collection, and VmRSS after the freed memory
// went back to the system.
func measure() usage {
	runtime.GC()
	debug.FreeOSMemory()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return usage{heap: m.HeapInuse, rss: vmRSS()}
}

func vmRSS() uint64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(data)) {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}

func mib(b uint64) float64 { return float64(int64(b)) / (1 << 20) }

// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
	"github.com/numapref/numapref/internal/testutil/builders"
	"github.com/numapref/numapref/internal/testutil/poll"
)

// world is what the harness creates on the apiserver before anything is measured: the
// Nodes, the pods bound to them and the NumaPreference that selects the pods.
type world struct {
	c           client.Client // uncached, not rate limited
	namespace   string
	preference  string
	nodes       int
	podsPerNode int
	workers     int
	nodeUIDs    []types.UID
}

// podLabels select the harness's pods; the NumaPreference prefers NUMA node 0 for them.
var podLabels = map[string]string{"app": "numapref-scale"}

func nodeName(i int) string { return fmt.Sprintf("node-%d", i) }

// parallel runs f(0..n-1) on the world's workers and stops at the first error.
func (w *world) parallel(ctx context.Context, n int, f func(ctx context.Context, i int) error) error {
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(w.workers)
	for i := range n {
		g.Go(func() error { return f(ctx, i) })
	}
	return g.Wait()
}

// createNamespace makes the namespace and its default ServiceAccount: no
// controller-manager runs to make it, and the ServiceAccount admission plugin refuses pods
// without it.
func (w *world) createNamespace(ctx context.Context) error {
	for _, o := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: w.namespace}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: w.namespace, Name: "default"}},
	} {
		if err := w.c.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating %T %s: %w", o, o.GetName(), err)
		}
	}
	return nil
}

// createNodes makes node-0 ... node-<n-1> and remembers their UIDs (a report is owned by
// its Node).
func (w *world) createNodes(ctx context.Context) error {
	w.nodeUIDs = make([]types.UID, w.nodes)
	return w.parallel(ctx, w.nodes, func(ctx context.Context, i int) error {
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName(i)}}
		err := w.c.Create(ctx, node)
		if apierrors.IsAlreadyExists(err) {
			err = w.c.Get(ctx, client.ObjectKeyFromObject(node), node)
		}
		if err != nil {
			return fmt.Errorf("creating node %s: %w", node.Name, err)
		}
		w.nodeUIDs[i] = node.UID
		return nil
	})
}

// createPods makes podsPerNode pods on every node, each with one container that runs, as
// the kubelet would report it: bound to the node, Running, with a container ID.
func (w *world) createPods(ctx context.Context) error {
	var done atomic.Int64
	return w.parallel(ctx, w.nodes*w.podsPerNode, func(ctx context.Context, i int) error {
		node, n := nodeName(i/w.podsPerNode), i%w.podsPerNode
		pod := builders.MakePod(w.namespace, fmt.Sprintf("%s-pod-%d", node, n)).Node(node).Labels(podLabels).
			NoServiceAccountToken().Containers("main").Obj()
		if err := w.c.Create(ctx, pod); err != nil {
			if apierrors.IsAlreadyExists(err) {
				return nil
			}
			return fmt.Errorf("creating pod %s: %w", pod.Name, err)
		}
		builders.MarkRunning(pod)
		if err := w.c.Status().Update(ctx, pod); err != nil {
			return fmt.Errorf("marking pod %s running: %w", pod.Name, err)
		}
		if d := done.Add(1); d%2000 == 0 {
			logf("setup: %d of %d pods", d, w.nodes*w.podsPerNode)
		}
		return nil
	})
}

// createPreference makes the NumaPreference that selects every pod of the harness.
func (w *world) createPreference(ctx context.Context) error {
	pref := builders.MakePreference(w.namespace, w.preference).SelectorLabels(podLabels).
		Mode(numav1.PlacementModeStatic).Node(0).Obj()
	if err := w.c.Create(ctx, pref); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating NumaPreference %s/%s: %w", w.namespace, w.preference, err)
	}
	return nil
}

func (w *world) getPreference(ctx context.Context) (*numav1.NumaPreference, error) {
	var pref numav1.NumaPreference
	err := w.c.Get(ctx, client.ObjectKey{Namespace: w.namespace, Name: w.preference}, &pref)
	return &pref, err
}

// retry calls f until it succeeds, a second apart, and counts the failures: a refused
// write is tried again as an agent would, until ctx ends.
func retry(ctx context.Context, failures *atomic.Int64, what string, f func() error) error {
	for {
		err := f()
		if err == nil {
			return nil
		}
		failures.Add(1)
		logf("%s: %v (trying again)", what, err)
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %w", what, err)
		case <-time.After(time.Second):
		}
	}
}

// waitFor polls done every interval until it is true, and fails after timeout.
func waitFor(ctx context.Context, timeout, interval time.Duration, what string, done func(context.Context) (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	err := poll.Context(ctx, interval, func() error {
		switch ok, err := done(ctx); {
		case ok:
			return nil
		case err != nil:
			return err
		}
		return errors.New("not yet")
	})
	if err != nil {
		return fmt.Errorf("%s: not within %s: %w", what, timeout, err)
	}
	return nil
}

// waitSummary waits until the preference's status, for its current generation, adds up
// to want.
func (w *world) waitSummary(ctx context.Context, timeout time.Duration, want numav1.Summary) error {
	var last numav1.Summary
	err := waitFor(ctx, timeout, 250*time.Millisecond, "the summary", func(ctx context.Context) (bool, error) {
		pref, err := w.getPreference(ctx)
		if err != nil {
			return false, err
		}
		last = pref.Status.Summary
		return pref.Status.ObservedGeneration == pref.Generation && last == want, nil
	})
	if err != nil {
		return fmt.Errorf("%w: it says %+v, want %+v", err, last, want)
	}
	return nil
}

// largestObject reads, as the watchers receive them (managedFields included), every
// NumaNodeReport and the NumaPreference, and returns the largest one's size and name.
func (w *world) largestObject(ctx context.Context, rc restGetter) (int, string, error) {
	size, name := 0, ""
	raw, err := rc.getRaw(ctx, "/apis/"+numav1.GroupVersion.String()+"/numanodereports")
	if err != nil {
		return 0, "", err
	}
	var list struct {
		Items []json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal(raw, &list); err != nil {
		return 0, "", fmt.Errorf("decoding the reports: %w", err)
	}
	for _, item := range list.Items {
		if len(item) > size {
			var meta struct {
				Metadata metav1.ObjectMeta `json:"metadata"`
			}
			_ = json.Unmarshal(item, &meta)
			size, name = len(item), "numanodereport/"+meta.Metadata.Name
		}
	}
	raw, err = rc.getRaw(ctx, fmt.Sprintf("/apis/%s/namespaces/%s/numapreferences/%s", numav1.GroupVersion, w.namespace, w.preference))
	if err != nil {
		return 0, "", err
	}
	if len(raw) > size {
		size, name = len(raw), "numapreference/"+w.preference
	}
	return size, name, nil
}

// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	_ "embed"
	"fmt"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/numapref/numapref/controllers/agent"
)

// legacyCRD is the previous design's NumaPreference CRD (status.nodes[], a map-list keyed
// by nodeName) under the group legacy.numapref.io.
//
//go:embed legacy_numapreferences.yaml
var legacyCRD []byte

var legacyGV = schema.GroupVersion{Group: "legacy.numapref.io", Version: "v1alpha1"}

// installLegacyCRD creates the legacy CRD unless it exists, and waits until it is served.
func (w *world) installLegacyCRD(ctx context.Context, timeout time.Duration) error {
	crd := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(legacyCRD, &crd.Object); err != nil {
		return fmt.Errorf("decoding the legacy CRD: %w", err)
	}
	if err := w.c.Create(ctx, crd); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating the legacy CRD: %w", err)
	}
	return waitFor(ctx, timeout, 200*time.Millisecond, "the legacy CRD to be established", func(ctx context.Context) (bool, error) {
		if err := w.c.Get(ctx, client.ObjectKeyFromObject(crd), crd); err != nil {
			return false, err
		}
		conditions, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
		for _, c := range conditions {
			if m, ok := c.(map[string]any); ok && m["type"] == "Established" && m["status"] == "True" {
				return true, nil
			}
		}
		return false, nil
	})
}

func (w *world) legacyPreference() *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(legacyGV.String())
	u.SetKind("NumaPreference")
	u.SetNamespace(w.namespace)
	u.SetName(w.preference)
	return u
}

// createLegacyPreference makes the legacy NumaPreference that every applier reports on.
func (w *world) createLegacyPreference(ctx context.Context) error {
	u := w.legacyPreference()
	u.Object["spec"] = map[string]any{
		"selector": map[string]any{"matchLabels": map[string]any{"app": podLabels["app"]}},
		"mode":     "Static", "node": int64(0),
	}
	if err := w.c.Create(ctx, u); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating the legacy NumaPreference: %w", err)
	}
	return nil
}

// applyLegacyEntries is the previous design's rollout: every node's agent
// server-side-applies its own entry of status.nodes[] on the status subresource, with
// field manager numapref-agent/<node>, forced, exactly as its reportStatus did, for
// podsPerNode pods of one container with tasks tasks each. A refused write is tried again
// a second later until ctx ends; failures counts them.
func (w *world) applyLegacyEntries(ctx context.Context, tasks int32, failures *atomic.Int64) error {
	pods := int64(w.podsPerNode)
	return w.parallel(ctx, w.nodes, func(ctx context.Context, i int) error {
		node := nodeName(i)
		u := w.legacyPreference()
		u.Object["status"] = map[string]any{"nodes": []any{map[string]any{
			"nodeName": node, "pods": pods, "containers": pods, "tasks": pods * int64(tasks),
		}}}
		return retry(ctx, failures, "applying the legacy entry of "+node, func() error {
			return w.c.Status().Apply(ctx, client.ApplyConfigurationFromUnstructured(u),
				client.FieldOwner(agent.AgentFieldManager(node)), client.ForceOwnership)
		})
	})
}

// waitLegacyEntries waits until the legacy NumaPreference has every node's entry with
// tasks tasks per pod.
func (w *world) waitLegacyEntries(ctx context.Context, timeout time.Duration, tasks int32) error {
	want := int64(w.podsPerNode) * int64(tasks)
	var seen int
	err := waitFor(ctx, timeout, 500*time.Millisecond, "the legacy entries", func(ctx context.Context) (bool, error) {
		u := w.legacyPreference()
		if err := w.c.Get(ctx, client.ObjectKeyFromObject(u), u); err != nil {
			return false, err
		}
		nodes, _, _ := unstructured.NestedSlice(u.Object, "status", "nodes")
		seen = 0
		for _, n := range nodes {
			if m, ok := n.(map[string]any); ok && m["tasks"] == want {
				seen++
			}
		}
		return seen == w.nodes, nil
	})
	if err != nil {
		return fmt.Errorf("%w: %d of %d entries are there", err, seen, w.nodes)
	}
	return nil
}

// legacyObjectSize is the size of the legacy NumaPreference as its watchers receive it.
func (w *world) legacyObjectSize(ctx context.Context, rc restGetter) (int, error) {
	raw, err := rc.getRaw(ctx, fmt.Sprintf("/apis/%s/namespaces/%s/numapreferences/%s", legacyGV, w.namespace, w.preference))
	return len(raw), err
}

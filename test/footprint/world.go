// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build linux

package main

import (
	"context"
	"fmt"

	"golang.org/x/sync/errgroup"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
)

const (
	namespace  = "footprint"
	preference = "footprint"
	agentName  = "numapref-agent"
)

var podLabels = map[string]string{"app": "footprint"}

// createWorld makes the namespace, the agent's Node, n pods bound to it that look Running,
// and the NumaPreference that selects them.
func createWorld(ctx context.Context, c client.Client, n int) error {
	objs := []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}},
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName}},
		&numav1.NumaPreference{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: preference},
			Spec:       numav1.NumaPreferenceSpec{Selector: numav1.LabelSelector{MatchLabels: podLabels}, Mode: numav1.PlacementModeSpread},
		},
	}
	for _, obj := range objs {
		if err := c.Create(ctx, obj); err != nil {
			return fmt.Errorf("creating %T %s: %w", obj, obj.GetName(), err)
		}
	}
	if err := createAgentPod(ctx, c); err != nil {
		return err
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(8)
	for i := range n {
		g.Go(func() error { return createPod(gctx, c, i) })
	}
	return g.Wait()
}

// createPod makes pod i, bound to the agent's node, and gives it the status a kubelet
// would: Running, one running container with an ID (no such container exists on this
// host, so the agent reports it as not found).
func createPod(ctx context.Context, c client.Client, i int) error {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: fmt.Sprintf("work-%03d", i), Labels: podLabels},
		Spec: corev1.PodSpec{
			NodeName:   nodeName,
			Containers: []corev1.Container{{Name: "app", Image: "registry.example/work:1"}},
		},
	}
	if err := c.Create(ctx, pod); err != nil {
		return fmt.Errorf("creating pod %s: %w", pod.Name, err)
	}
	now := metav1.Now()
	pod.Status = corev1.PodStatus{
		Phase: corev1.PodRunning, QOSClass: corev1.PodQOSBestEffort, StartTime: &now,
		ContainerStatuses: []corev1.ContainerStatus{{
			Name: "app", Image: "registry.example/work:1", Ready: true,
			ContainerID: fmt.Sprintf("containerd://%064x", i+1),
			State:       corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}},
		}},
	}
	if err := c.Status().Update(ctx, pod); err != nil {
		return fmt.Errorf("writing the status of pod %s: %w", pod.Name, err)
	}
	return nil
}

// createAgentPod makes the agent's own DaemonSet and its pod on the node, as the chart's: the
// agent, given -pod-name, watches that DaemonSet (its drain on uninstall).
func createAgentPod(ctx context.Context, c client.Client) error {
	labels := map[string]string{"app.kubernetes.io/name": agentName}
	template := corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: labels},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "agent", Image: "registry.example/numapref:1"}}},
	}
	ds := &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: agentName},
		Spec:       appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: template},
	}
	if err := c.Create(ctx, ds); err != nil {
		return fmt.Errorf("creating the agent's DaemonSet: %w", err)
	}
	pod := &corev1.Pod{ObjectMeta: template.ObjectMeta, Spec: template.Spec}
	pod.Namespace, pod.Name, pod.Spec.NodeName = namespace, agentName+"-0", nodeName
	pod.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(ds, appsv1.SchemeGroupVersion.WithKind("DaemonSet"))}
	if err := c.Create(ctx, pod); err != nil {
		return fmt.Errorf("creating the agent's pod: %w", err)
	}
	return nil
}

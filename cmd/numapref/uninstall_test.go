// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
)

// TestUninstallCheckNamesTheNodesWhoseValuesStay: the hook deletes the DaemonSet, counts a
// node drained only on its agent's word about this DaemonSet, and names every other node,
// with why, instead of saying nothing. (The e2e's uninstall specs run it on a real node.)
func TestUninstallCheckNamesTheNodesWhoseValuesStay(t *testing.T) {
	scheme, err := newScheme()
	if err != nil {
		t.Fatal(err)
	}
	labels := map[string]string{"app": "agent"}
	ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "agents", UID: "ds-uid"},
		Spec: appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: labels}}}
	pod := func(name, node string, ready bool, restarts int32) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Labels: labels}, Spec: corev1.PodSpec{NodeName: node}}
		status := corev1.ConditionFalse
		if ready {
			status = corev1.ConditionTrue
		}
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: status}}
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "agent", RestartCount: restarts}}
		return p
	}
	report := func(node, reason, uid string) *numav1.NumaNodeReport {
		status := metav1.ConditionTrue
		if reason != numav1.ReasonDrained {
			status = metav1.ConditionFalse
		}
		return &numav1.NumaNodeReport{ObjectMeta: metav1.ObjectMeta{Name: node}, Status: numav1.NumaNodeReportStatus{
			Conditions: []metav1.Condition{{Type: numav1.ConditionDrained, Status: status, Reason: reason, Message: "(DaemonSet agents, UID " + uid + ")"}}}}
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(ds,
		pod("a", "node-a", true, 0), pod("b", "node-b", false, 7), pod("c", "node-c", true, 0), pod("d", "node-d", true, 0),
		report("node-a", numav1.ReasonDrained, "ds-uid"),
		report("node-c", numav1.ReasonDrained, "an-earlier-daemonset"),
		report("node-d", numav1.ReasonUndoIncomplete, "ds-uid"),
	).Build()

	var out bytes.Buffer
	stay, err := checkUninstall(context.Background(), c, uninstallFlags{namespace: "ns", daemonSet: "agents", timeout: 50 * time.Millisecond, poll: 10 * time.Millisecond}, &out)
	if err != nil {
		t.Fatal(err)
	}
	if stay != 3 {
		t.Errorf("values stay on %d nodes, want 3 (b not ready, c's word is of another DaemonSet, d could not undo)", stay)
	}
	for _, want := range []string{
		"node node-a: drained",
		"node node-b: VALUES STAY: its agent (pod b) was not ready (7 restarts)",
		"node node-c: VALUES STAY: its agent did not report a drain in time",
		"node node-d: VALUES STAY: (DaemonSet agents, UID ds-uid)",
		"on 3 nodes (node-b, node-c, node-d)",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(ds), &appsv1.DaemonSet{}); !apierrors.IsNotFound(err) {
		t.Errorf("the DaemonSet is not deleted: %v", err)
	}
}

// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
	"github.com/numapref/numapref/controllers/internal/status"
)

// TestNodeCacheKeepsOnlyThePreferenceSpec: of a NumaPreference, an agent's cache keeps its
// identity, lifecycle and spec; status and unbounded metadata go.
func TestNodeCacheKeepsOnlyThePreferenceSpec(t *testing.T) {
	var transform func(any) (any, error)
	for obj, by := range NodeCacheOptions("node-a", NewPreferenceCap(status.DefaultMaxPreferencesPerNamespace)).ByObject {
		if _, ok := obj.(*numav1.NumaPreference); ok {
			transform = by.Transform
		}
	}
	if transform == nil {
		t.Fatal("NodeCacheOptions has no transform for NumaPreferences")
	}
	now := metav1.Now()
	kept := metav1.ObjectMeta{Namespace: "ns", Name: "db", UID: "u", ResourceVersion: "7", Generation: 3,
		CreationTimestamp: now, DeletionTimestamp: &now}
	spec := numav1.NumaPreferenceSpec{Selector: numav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}, Node: ptr.To[int32](1)}
	in := &numav1.NumaPreference{ObjectMeta: *kept.DeepCopy(), Spec: spec,
		Status: numav1.NumaPreferenceStatus{ObservedGeneration: 3, Summary: numav1.Summary{Pods: 2}}}
	in.Labels, in.Annotations = map[string]string{"l": "v"}, map[string]string{"big": "..."}
	in.Finalizers = []string{"example.com/f"}
	in.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}
	in.OwnerReferences = []metav1.OwnerReference{{Kind: "ConfigMap", Name: "c"}}

	got, err := transform(in)
	if err != nil {
		t.Fatal(err)
	}
	want := &numav1.NumaPreference{ObjectMeta: kept, Spec: spec}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("cached NumaPreference (-want +got):\n%s", diff)
	}
}

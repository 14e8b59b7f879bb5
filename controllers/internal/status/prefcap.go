// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package status

import (
	"cmp"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
)

// DefaultMaxPreferencesPerNamespace is how many NumaPreferences of one namespace the
// agents and the summarizer keep whole by default (--max-preferences-per-namespace). The
// largest valid one costs an agent about 35 KiB (BENCHMARKS.md), so a namespace at the cap
// costs at most about 4.5 MiB of an agent's 128Mi.
const DefaultMaxPreferencesPerNamespace = 128

// OverCap says whether the summarizer has judged p past its namespace's cap: its Ready
// condition says TooManyPreferences. Only the summarizer writes a preference's status, so
// no tenant can put another's preference over the cap.
func OverCap(p *numav1.NumaPreference) bool {
	c := meta.FindStatusCondition(p.Status.Conditions, numav1.ConditionReady)
	return c != nil && c.Reason == numav1.ReasonTooManyPreferences
}

// CompareAge orders two preferences of one namespace as the cap keeps them: the oldest
// first (creation time, which the API sets), then by name. The same order decides a
// conflict between two preferences on one container.
func CompareAge(a, b *numav1.NumaPreference) int {
	if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
		return c
	}
	return cmp.Compare(a.Name, b.Name)
}

// Identity is what every cache keeps of an object's metadata: its identity, version, age
// and lifecycle. Labels, annotations, finalizers, owners and managedFields, which the API
// bounds only by the request's size, go.
func Identity(m *metav1.ObjectMeta) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Namespace: m.Namespace, Name: m.Name, UID: m.UID, ResourceVersion: m.ResourceVersion,
		Generation: m.Generation, CreationTimestamp: m.CreationTimestamp, DeletionTimestamp: m.DeletionTimestamp,
	}
}

// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package builders

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
)

// PreferenceWrapper builds a NumaPreference.
type PreferenceWrapper struct{ pref numav1.NumaPreference }

// MakePreference starts a NumaPreference namespace/name with an empty spec: no selector
// (the API refuses it), no mode (the API defaults it to Static) and no node.
func MakePreference(namespace, name string) *PreferenceWrapper {
	return &PreferenceWrapper{pref: numav1.NumaPreference{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}}
}

// Obj returns the NumaPreference built so far; later calls on the wrapper do not change it.
func (w *PreferenceWrapper) Obj() *numav1.NumaPreference { return w.pref.DeepCopy() }

// Selector adds a label the selected pods carry.
func (w *PreferenceWrapper) Selector(key, value string) *PreferenceWrapper {
	if w.pref.Spec.Selector.MatchLabels == nil {
		w.pref.Spec.Selector.MatchLabels = map[string]string{}
	}
	w.pref.Spec.Selector.MatchLabels[key] = value
	return w
}

// SelectorLabels adds every label of m to the selector.
func (w *PreferenceWrapper) SelectorLabels(m map[string]string) *PreferenceWrapper {
	for k, v := range m {
		w.Selector(k, v)
	}
	return w
}

// Node sets spec.node, the NUMA node of mode Static.
func (w *PreferenceWrapper) Node(id int32) *PreferenceWrapper {
	w.pref.Spec.Node = &id
	return w
}

// Mode sets spec.mode.
func (w *PreferenceWrapper) Mode(m numav1.PlacementMode) *PreferenceWrapper {
	w.pref.Spec.Mode = m
	return w
}

// Nodes sets spec.nodes, the NUMA nodes an automatic mode may choose.
func (w *PreferenceWrapper) Nodes(ids ...int32) *PreferenceWrapper {
	w.pref.Spec.Nodes = ids
	return w
}

// Containers sets spec.containers.
func (w *PreferenceWrapper) Containers(names ...string) *PreferenceWrapper {
	w.pref.Spec.Containers = names
	return w
}

// Generation sets metadata.generation, which the apiserver sets on create.
func (w *PreferenceWrapper) Generation(g int64) *PreferenceWrapper {
	w.pref.Generation = g
	return w
}

// CreatedAt sets metadata.creationTimestamp: the older preference wins a conflict.
func (w *PreferenceWrapper) CreatedAt(t metav1.Time) *PreferenceWrapper {
	w.pref.CreationTimestamp = t
	return w
}

// PageMigration sets spec.pageMigration.
func (w *PreferenceWrapper) PageMigration(m numav1.PageMigration) *PreferenceWrapper {
	w.pref.Spec.PageMigration = m
	return w
}

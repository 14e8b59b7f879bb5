// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

// Package largest builds the largest NumaPreference the CRD accepts: every list and map of
// its spec at its bound, every string at its longest. Tests check that the apiserver
// accepts it; test/bounds measures what 1,000 of them cost an agent.
package largest

import (
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
)

// Bounds the CRD sets outside the selector (numapreference_types.go).
const (
	maxContainers       = 64
	maxContainerNameLen = 63
	maxNodes            = 64
	maxObjectNameLen    = 253
)

// NumaPreference is the largest valid NumaPreference named name (padded to 253
// characters with the suffix seq, so that names stay distinct) in namespace ns. Its labels
// and keys are valid Kubernetes labels too, so an agent parses its selector.
func NumaPreference(ns string, seq int) *numav1.NumaPreference {
	p := &numav1.NumaPreference{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: pad(fmt.Sprintf("largest-%d-", seq), maxObjectNameLen)},
		Spec: numav1.NumaPreferenceSpec{
			Selector: numav1.LabelSelector{MatchLabels: map[string]string{}},
			Mode:     numav1.PlacementModeSpread,
		},
	}
	for i := range numav1.MaxSelectorLabels {
		p.Spec.Selector.MatchLabels[labelKey("l", i)] = labelValue("v", i)
	}
	for i := range numav1.MaxSelectorExpressions {
		e := numav1.LabelSelectorRequirement{Key: labelKey("e", i), Operator: metav1.LabelSelectorOpNotIn}
		for j := range numav1.MaxSelectorValues {
			e.Values = append(e.Values, labelValue(fmt.Sprintf("v%d-", i), j))
		}
		p.Spec.Selector.MatchExpressions = append(p.Spec.Selector.MatchExpressions, e)
	}
	for i := range maxContainers {
		p.Spec.Containers = append(p.Spec.Containers, pad(fmt.Sprintf("c%d-", i), maxContainerNameLen))
	}
	for i := range maxNodes {
		p.Spec.Nodes = append(p.Spec.Nodes, int32(numav1.MaxNUMANodeID-i)) // four digits each
	}
	return p
}

// labelKey is a distinct label key of the longest length: a 253-character DNS prefix, '/',
// and a 63-character name.
func labelKey(kind string, i int) string {
	prefix := strings.Join([]string{strings.Repeat("a", 63), strings.Repeat("b", 63), strings.Repeat("c", 63), strings.Repeat("d", 61)}, ".")
	return prefix + "/" + pad(fmt.Sprintf("%s%d-", kind, i), 63)
}

// labelValue is a distinct label value of the longest length, 63 characters.
func labelValue(kind string, i int) string {
	return pad(fmt.Sprintf("%s%d-", kind, i), numav1.MaxLabelValueLength)
}

// pad fills s with 'x' up to n characters; it ends in a letter, as DNS labels must.
func pad(s string, n int) string { return s + strings.Repeat("x", n-len(s)) }

// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package largest

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
)

// TestNumaPreference: every bound is reached, and the selector is one an agent parses.
func TestNumaPreference(t *testing.T) {
	p := NumaPreference("ns", 7)
	sel := p.Spec.Selector
	if len(sel.MatchLabels) != numav1.MaxSelectorLabels || len(sel.MatchExpressions) != numav1.MaxSelectorExpressions ||
		len(p.Spec.Containers) != maxContainers || len(p.Spec.Nodes) != maxNodes || len(p.Name) != maxObjectNameLen {
		t.Fatalf("not at every bound: %d labels, %d expressions, %d containers, %d nodes, name of %d",
			len(sel.MatchLabels), len(sel.MatchExpressions), len(p.Spec.Containers), len(p.Spec.Nodes), len(p.Name))
	}
	for k, v := range sel.MatchLabels {
		if len(k) != numav1.MaxLabelKeyLength || len(v) != numav1.MaxLabelValueLength {
			t.Errorf("label %q=%q: lengths %d and %d, want %d and %d", k, v, len(k), len(v), numav1.MaxLabelKeyLength, numav1.MaxLabelValueLength)
		}
	}
	for _, e := range sel.MatchExpressions {
		if len(e.Key) != numav1.MaxLabelKeyLength || len(e.Values) != numav1.MaxSelectorValues {
			t.Errorf("expression on %q: key of %d, %d values", e.Key, len(e.Key), len(e.Values))
		}
		m := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{metav1.LabelSelectorRequirement(e)}}
		if _, err := metav1.LabelSelectorAsSelector(m); err != nil {
			t.Errorf("expression on %q does not parse: %v", e.Key, err)
		}
	}
	if _, err := metav1.LabelSelectorAsSelector(&metav1.LabelSelector{MatchLabels: sel.MatchLabels}); err != nil {
		t.Errorf("matchLabels do not parse: %v", err)
	}
	for _, c := range p.Spec.Containers {
		if errs := validation.IsDNS1123Label(c); len(errs) > 0 || len(c) != maxContainerNameLen {
			t.Errorf("container %q: %v", c, errs)
		}
	}
	if errs := validation.IsDNS1123Subdomain(p.Name); len(errs) > 0 {
		t.Errorf("name %q: %v", p.Name, errs)
	}
}

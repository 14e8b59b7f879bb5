// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build chart

package chart

import (
	"strings"
	"testing"
)

// The chart's Kubernetes minimum is what it needs: ValidatingAdmissionPolicy in
// admissionregistration.k8s.io/v1 (the node restriction) and the node claim in
// service-account tokens, both GA in 1.30. Below it helm refuses with the minimum named.
func TestKubeVersionMinimum(t *testing.T) {
	for _, c := range []struct {
		version string
		ok      bool
	}{{"1.29.9", false}, {"1.30.0", true}, {"1.37.2", true}} {
		_, stderr, err := helmTemplate(t, nil, "--kube-version", c.version)
		switch {
		case c.ok && err != nil:
			t.Errorf("Kubernetes %s: helm template failed: %v: %s", c.version, err, stderr)
		case !c.ok && err == nil:
			t.Errorf("Kubernetes %s: helm template rendered, want a refusal below 1.30", c.version)
		case !c.ok && !strings.Contains(stderr, ">=1.30.0-0"):
			t.Errorf("Kubernetes %s: the refusal does not name the minimum: %s", c.version, stderr)
		}
	}
}

// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build chart

package chart

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"
)

// The node restriction policy's identity is the release's ServiceAccount, in the release's
// namespace: the binding's parameter, whatever the release and namespace are called.
func TestNodeRestrictionFollowsTheRelease(t *testing.T) {
	tests := map[string]struct {
		values         map[string]any
		wantSA, wantNS string
	}{
		"default ServiceAccount": {wantSA: "acme-numapref", wantNS: "team-numa"},
		"named ServiceAccount":   {values: map[string]any{"serviceAccount": map[string]any{"name": "numa-agents"}}, wantSA: "numa-agents", wantNS: "team-numa"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			out, stderr, err := helmTemplateRelease(t, "acme", "team-numa", tc.values)
			if err != nil {
				t.Fatalf("helm template: %v\n%s", err, stderr)
			}
			if strings.Contains(out, "numapref-system") {
				t.Error("the chart's output in namespace team-numa names numapref-system")
			}
			policy, binding := restrictionObjects(t, out)
			if policy.Spec.ParamKind != (paramKind{APIVersion: "v1", Kind: "ServiceAccount"}) {
				t.Errorf("policy paramKind = %+v, want v1 ServiceAccount", policy.Spec.ParamKind)
			}
			want := paramRef{Name: tc.wantSA, Namespace: tc.wantNS, ParameterNotFoundAction: "Allow"}
			if diff := cmp.Diff(want, binding.Spec.ParamRef); diff != "" {
				t.Errorf("binding paramRef (-want +got):\n%s", diff)
			}
			if binding.Spec.PolicyName != policy.Metadata.Name || policy.Metadata.Name != "acme-numapref-node-restriction" {
				t.Errorf("binding %q binds policy %q, want the release's policy acme-numapref-node-restriction", binding.Metadata.Name, binding.Spec.PolicyName)
			}
		})
	}
}

type paramKind struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
}

type paramRef struct {
	Name                    string `json:"name"`
	Namespace               string `json:"namespace"`
	ParameterNotFoundAction string `json:"parameterNotFoundAction"`
}

type restrictionObject struct {
	Kind     string `json:"kind"`
	Metadata struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec struct {
		ParamKind  paramKind `json:"paramKind"`
		ParamRef   paramRef  `json:"paramRef"`
		PolicyName string    `json:"policyName"`
	} `json:"spec"`
}

// restrictionObjects returns the one ValidatingAdmissionPolicy and its one binding of out.
func restrictionObjects(t *testing.T, out string) (policy, binding restrictionObject) {
	t.Helper()
	var policies, bindings int
	for _, doc := range documents(t, out) {
		var o restrictionObject
		if err := yaml.Unmarshal(doc, &o); err != nil {
			t.Fatalf("decoding document: %v\n%s", err, doc)
		}
		switch o.Kind {
		case "ValidatingAdmissionPolicy":
			policy, policies = o, policies+1
		case "ValidatingAdmissionPolicyBinding":
			binding, bindings = o, bindings+1
		}
	}
	if policies != 1 || bindings != 1 {
		t.Fatalf("%d policies and %d bindings in the chart's output, want one of each", policies, bindings)
	}
	return policy, binding
}

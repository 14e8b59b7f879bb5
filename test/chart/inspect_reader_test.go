// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build chart

package chart

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"
)

// TestInspectReaderRole checks the ClusterRole that lets users call the agents' inspect
// endpoint: only get on /inspect/*, the same rules as config/rbac's copy, bound to nobody,
// and only rendered when the metrics server (which serves the endpoint) is.
func TestInspectReaderRole(t *testing.T) {
	root := repoRoot(t)
	b, err := os.ReadFile(filepath.Join(root, "config", "rbac", "inspect-reader-role.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var kustomized rbacv1.ClusterRole
	if err := yaml.UnmarshalStrict(b, &kustomized); err != nil {
		t.Fatalf("config/rbac/inspect-reader-role.yaml: %v", err)
	}
	wantRules := []rbacv1.PolicyRule{{NonResourceURLs: []string{"/inspect/*"}, Verbs: []string{"get"}}}
	if diff := cmp.Diff(wantRules, kustomized.Rules); diff != "" {
		t.Errorf("config/rbac/inspect-reader-role.yaml rules (-want +got):\n%s", diff)
	}
	var kustomization struct {
		Resources []string `json:"resources"`
	}
	b, err = os.ReadFile(filepath.Join(root, "config", "rbac", "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, &kustomization); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(kustomization.Resources, "inspect-reader-role.yaml") {
		t.Errorf("config/rbac/kustomization.yaml resources %v do not include inspect-reader-role.yaml", kustomization.Resources)
	}

	name := release + "-numapref-inspect-reader"
	tests := map[string]struct {
		values map[string]any
		want   bool
	}{
		"defaults":    {want: true},
		"metrics off": {values: map[string]any{"metrics": map[string]any{"enabled": false}}, want: false},
	}
	for tcName, tc := range tests {
		t.Run(tcName, func(t *testing.T) {
			r := render(t, tc.values)
			role, ok := r.clusterRoles[name]
			if ok != tc.want {
				t.Fatalf("ClusterRole %s rendered = %v, want %v (have %v)", name, ok, tc.want, keys(r.clusterRoles))
			}
			if !ok {
				return
			}
			if diff := cmp.Diff(kustomized.Rules, role.Rules); diff != "" {
				t.Errorf("chart rules differ from config/rbac/inspect-reader-role.yaml (-want +got):\n%s", diff)
			}
			for _, crb := range r.clusterRoleBindings {
				if crb.RoleRef.Name == name {
					t.Errorf("ClusterRoleBinding %s binds %s: the chart must bind it to nobody", crb.Name, name)
				}
			}
			for _, rb := range r.roleBindings {
				if rb.RoleRef.Name == name {
					t.Errorf("RoleBinding %s binds %s: the chart must bind it to nobody", rb.Name, name)
				}
			}
		})
	}
}

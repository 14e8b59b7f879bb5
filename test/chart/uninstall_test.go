// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build chart

package chart

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	batchv1 "k8s.io/api/batch/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"
)

// TestUninstallHook: helm uninstall runs a pre-delete Job that deletes the agents'
// DaemonSet and waits for their drains, whose log helm prints; its rights are that one
// DaemonSet, the pods' list and the reports' get; it is off with uninstall.check=false.
func TestUninstallHook(t *testing.T) {
	r := render(t, map[string]any{"uninstall": map[string]any{"drainTimeout": "90s", "failIfValuesStay": true}})
	name := fullname + "-uninstall-check"
	var job batchv1.Job
	if err := yaml.UnmarshalStrict(r.hooks["Job/"+name], &job); err != nil {
		t.Fatalf("the hook Job: %v (hooks %v)", err, keys(r.hooks))
	}
	if got := job.Annotations["helm.sh/hook"]; got != "pre-delete" {
		t.Errorf("hook %q, want pre-delete", got)
	}
	if got := job.Annotations["helm.sh/hook-output-log-policy"]; got != "hook-succeeded,hook-failed" {
		t.Errorf("output log policy %q: helm uninstall must print the check's output, whatever its end", got)
	}
	pod := job.Spec.Template.Spec
	args := pod.Containers[0].Args
	for _, a := range []string{"uninstall-check", "--daemonset=" + fullname + "-agent", "--timeout=90s", "--fail-if-values-stay=true"} {
		if !slices.Contains(args, a) {
			t.Errorf("args %v lack %s", args, a)
		}
	}
	agents := r.daemonSets[0].Spec.Selector.MatchLabels
	matches := true
	for k, v := range agents {
		matches = matches && job.Spec.Template.Labels[k] == v
	}
	if matches {
		t.Errorf("the Job's pod carries the agents' selector %v: the check would count it as an agent", agents)
	}
	if sc := pod.Containers[0].SecurityContext; sc == nil || boolString(sc.ReadOnlyRootFilesystem) != "true" || boolString(sc.AllowPrivilegeEscalation) != "false" ||
		pod.SecurityContext == nil || pod.SecurityContext.RunAsNonRoot == nil || !*pod.SecurityContext.RunAsNonRoot {
		t.Errorf("the Job's security context %+v / %+v", pod.SecurityContext, sc)
	}
	var role rbacv1.Role
	if err := yaml.UnmarshalStrict(r.hooks["Role/"+name], &role); err != nil {
		t.Fatal(err)
	}
	want := []rbacv1.PolicyRule{
		{APIGroups: []string{"apps"}, Resources: []string{"daemonsets"}, ResourceNames: []string{fullname + "-agent"}, Verbs: []string{"get", "delete"}},
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"list"}},
	}
	if !cmp.Equal(want, role.Rules) {
		t.Errorf("the hook's Role %+v, want %+v", role.Rules, want)
	}
	var cr rbacv1.ClusterRole
	if err := yaml.UnmarshalStrict(r.hooks["ClusterRole/"+name], &cr); err != nil {
		t.Fatal(err)
	}
	if !cmp.Equal([]rbacv1.PolicyRule{{APIGroups: []string{"numa.numapref.io"}, Resources: []string{"numanodereports"}, Verbs: []string{"get"}}}, cr.Rules) {
		t.Errorf("the hook's ClusterRole %+v", cr.Rules)
	}

	off := render(t, map[string]any{"uninstall": map[string]any{"check": false}})
	if len(off.hooks) != 0 {
		t.Errorf("hooks with uninstall.check=false: %v", keys(off.hooks))
	}
}

// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build chart

package chart

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
)

// The summarizer is a Deployment of its own: no host namespace, no capability, non-root, and
// its ServiceAccount is the only subject of any rule on numapreferences/status or leases.
func TestSummarizer(t *testing.T) {
	fullname := release + "-numapref"
	for _, tc := range []struct {
		name        string
		values      map[string]any
		replicas    int32
		hostNetwork bool
	}{
		{name: "defaults", replicas: 2},
		{name: "host network, one replica", values: map[string]any{"summarizer": map[string]any{"replicas": 1, "hostNetwork": true, "healthProbe": map[string]any{"port": 8082}}}, replicas: 1, hostNetwork: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := render(t, tc.values)
			d, ok := r.deployments[fullname+"-summarizer"]
			if _, signer := r.deployments[fullname+"-signer"]; !ok || !signer || len(r.deployments) != 2 {
				t.Fatalf("deployments %v, want the summarizer's and the signer's", keys(r.deployments))
			}
			if d.Spec.Replicas == nil || *d.Spec.Replicas != tc.replicas {
				t.Errorf("replicas = %v, want %d", d.Spec.Replicas, tc.replicas)
			}
			pdb, ok := r.pdbs[fullname+"-summarizer"]
			if !ok || pdb.Spec.MaxUnavailable == nil || pdb.Spec.MaxUnavailable.IntValue() != 1 || !cmp.Equal(pdb.Spec.Selector, d.Spec.Selector) {
				t.Errorf("PodDisruptionBudget %+v, want maxUnavailable 1 over the summarizer's pods", pdb.Spec)
			}
			pod := d.Spec.Template.Spec
			if pod.HostPID || pod.HostIPC || pod.HostNetwork != tc.hostNetwork {
				t.Errorf("hostPID %v, hostIPC %v, hostNetwork %v; want only hostNetwork %v", pod.HostPID, pod.HostIPC, pod.HostNetwork, tc.hostNetwork)
			}
			if pod.ServiceAccountName != fullname+"-summarizer" {
				t.Errorf("serviceAccountName = %q, want its own", pod.ServiceAccountName)
			}
			psc := pod.SecurityContext
			if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.RunAsUser == nil || *psc.RunAsUser == 0 {
				t.Errorf("pod securityContext %+v, want non-root", psc)
			}
			// The summarizer signs nothing: it mounts nothing (TestNodeCertificates).
			if len(pod.Containers) != 1 || len(pod.Volumes) != 0 {
				t.Fatalf("%d containers and volumes %v, want one container and no volume", len(pod.Containers), pod.Volumes)
			}
			c := pod.Containers[0]
			if sc := c.SecurityContext; sc == nil || sc.Capabilities == nil || !cmp.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) != 0 ||
				boolString(sc.Privileged) != "false" || boolString(sc.AllowPrivilegeEscalation) != "false" || boolString(sc.ReadOnlyRootFilesystem) != "true" {
				t.Errorf("container securityContext %+v, want every capability dropped, none added, read-only, unprivileged", sc)
			}
			wantArgs := []string{"summarizer", "--health-probe-bind-address=:8082", "--leader-election-namespace=$(POD_NAMESPACE)", "--max-preferences-per-namespace=128", "--zap-log-level=info"}
			if diff := cmp.Diff(wantArgs, c.Args); diff != "" {
				t.Errorf("args (-want +got):\n%s", diff)
			}

			// Who may write a preference's status or take a lease: the summarizer alone.
			for name, cr := range r.clusterRoles {
				if grants(cr.Rules, "numapreferences/status", "leases") && name != fullname+"-summarizer" {
					t.Errorf("ClusterRole %s grants status or leases: %+v", name, cr.Rules)
				}
			}
			for name, role := range r.roles {
				if grants(role.Rules, "numapreferences/status", "leases") {
					if b := r.roleBindings[name]; !cmp.Equal(b.Subjects, []rbacv1.Subject{{Kind: "ServiceAccount", Name: fullname + "-summarizer", Namespace: namespace}}) {
						t.Errorf("Role %s grants status or leases to %+v, want the summarizer only", name, b.Subjects)
					}
				}
			}
			if !grants(r.clusterRoles[fullname+"-summarizer"].Rules, "numapreferences/status") {
				t.Error("the summarizer's ClusterRole cannot write status")
			}
		})
	}
}

// grants tells whether any rule names one of the resources.
func grants(rules []rbacv1.PolicyRule, resources ...string) bool {
	for _, r := range rules {
		for _, res := range resources {
			if slices.Contains(r.Resources, res) || slices.Contains(r.Resources, "*") {
				return true
			}
		}
	}
	return false
}

// grantsVerb tells whether rules grant any of verbs on resource.
func grantsVerb(rules []rbacv1.PolicyRule, resource string, verbs ...string) bool {
	for _, r := range rules {
		if !slices.Contains(r.Resources, resource) && !slices.Contains(r.Resources, "*") {
			continue
		}
		for _, v := range verbs {
			if slices.Contains(r.Verbs, v) || slices.Contains(r.Verbs, "*") {
				return true
			}
		}
	}
	return false
}

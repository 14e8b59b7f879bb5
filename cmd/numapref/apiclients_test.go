// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
	"github.com/numapref/numapref/controllers/agentcert"
)

var _ agentcert.NodeCertificateClient = (*reviewClients)(nil)

// TestSchemeHasWhatTheProcessesUse: every kind the agent's and the summarizer's caches,
// clients and Event recorders handle is in the scheme, and groups they do not use are not.
func TestSchemeHasWhatTheProcessesUse(t *testing.T) {
	scheme, err := newScheme()
	if err != nil {
		t.Fatal(err)
	}
	tests := map[string]struct {
		obj  runtime.Object
		want bool
	}{
		"pods (the agent's cache)":              {&corev1.PodList{}, true},
		"the Node (labels, the signer's check)": {&corev1.Node{}, true},
		"core Events":                           {&corev1.Event{}, true},
		"the agent's DaemonSet (drain)":         {&appsv1.DaemonSetList{}, true},
		"the summarizer's lease":                {&coordinationv1.Lease{}, true},
		"events.k8s.io Events":                  {&eventsv1.Event{}, true},
		"CSRs (the signer)":                     {&certificatesv1.CertificateSigningRequestList{}, true},
		"ResourceSlices (FollowDevices, DRA)":   {&resourcev1.ResourceSliceList{}, true},
		"ResourceClaims (FollowDevices, DRA)":   {&resourcev1.ResourceClaim{}, true},
		"NumaPreferences":                       {&numav1.NumaPreferenceList{}, true},
		"NumaNodeReports":                       {&numav1.NumaNodeReportList{}, true},
		"Jobs (unused)":                         {&batchv1.Job{}, false},
		"ClusterRoles (unused)":                 {&rbacv1.ClusterRole{}, false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, _, err := scheme.ObjectKinds(tc.obj)
			if got := err == nil; got != tc.want {
				t.Errorf("%T in the scheme = %t, want %t (err: %v)", tc.obj, got, tc.want, err)
			}
		})
	}
}

// TestReviewClientsShareOneRateLimiter: as kubernetes.NewForConfig's clients do, the
// agent's typed clients share the config's QPS and Burst instead of one budget each.
func TestReviewClientsShareOneRateLimiter(t *testing.T) {
	cfg := &rest.Config{Host: "https://127.0.0.1:1", QPS: 5, Burst: 10}
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c, err := newReviewClients(cfg, httpClient)
	if err != nil {
		t.Fatal(err)
	}
	limiter := c.core.RESTClient().GetRateLimiter()
	if limiter == nil {
		t.Fatal("the core client has no rate limiter")
	}
	for name, other := range map[string]rest.Interface{
		"certificates": c.certificates.RESTClient(), "authentication": c.authentication.RESTClient(),
		"authorization": c.authorization.RESTClient(), "discovery": c.discovery.RESTClient(),
	} {
		if other.GetRateLimiter() != limiter {
			t.Errorf("the %s client has a rate limiter of its own", name)
		}
	}
	if cfg.RateLimiter != nil {
		t.Error("newReviewClients changed the caller's config")
	}
}

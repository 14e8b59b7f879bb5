// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"net/http"
	"testing"
)

func TestAPIResource(t *testing.T) {
	for path, want := range map[string]string{
		"/api/v1/namespaces/ns/pods/p":        "pods",
		"/api/v1/namespaces/ns/pods":          "pods",
		"/api/v1/nodes/n1":                    "nodes",
		"/api/v1/namespaces/ns":               "namespaces",
		"/api/v1/namespaces/ns/pods/p/status": "pods/status",
		"/apis/numa.numapref.io/v1alpha1/namespaces/ns/numapreferences/x/status": "numapreferences/status",
		"/apis/numa.numapref.io/v1alpha1/numapreferences":                        "numapreferences",
		"/apis/coordination.k8s.io/v1/namespaces/ns/leases/numapref-summary":     "leases",
		"/apis/events.k8s.io/v1/namespaces/ns/events":                            "events",
		"/apis":             "other",
		"/api":              "other",
		"/version":          "other",
		"/api/v1/a/b/c/d/e": "other",
	} {
		if got := APIResource(path); got != want {
			t.Errorf("APIResource(%q) = %q, want %q", path, got, want)
		}
	}
}

func TestAPIMethodTellsDryRuns(t *testing.T) {
	for url, want := range map[string]string{
		"https://api/apis/numa.numapref.io/v1alpha1/numanodereports?dryRun=All":     "POST-dryrun",
		"https://api/apis/numa.numapref.io/v1alpha1/numanodereports?fieldManager=x": "POST",
	} {
		req, err := http.NewRequest(http.MethodPost, url, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := apiMethod(req); got != want {
			t.Errorf("apiMethod(POST %s) = %q, want %q", url, got, want)
		}
	}
}

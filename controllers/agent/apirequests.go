// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"net/http"
	"strings"

	"k8s.io/client-go/rest"

	"github.com/numapref/numapref/internal/metrics"
)

// InstrumentAPI makes every request made with cfg count in numapref_api_requests_total.
func InstrumentAPI(cfg *rest.Config) {
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
			metrics.APIRequests.WithLabelValues(apiMethod(req), APIResource(req.URL.Path)).Inc()
			return rt.RoundTrip(req)
		})
	})
}

// apiMethod is the request's HTTP method, with "-dryrun" for a dry run (the node
// restriction check's): the API stores nothing of it, so it is not a write.
func apiMethod(req *http.Request) string {
	if req.URL.Query().Has("dryRun") {
		return req.Method + "-dryrun"
	}
	return req.Method
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// APIResource names the resource of an API path: "pods", "numapreferences/status",
// "leases", or "other" for discovery and anything that is not a resource path.
//
//	/api/v1/namespaces/ns/pods/name            -> pods
//	/apis/g/v1/namespaces/ns/res/name/status   -> res/status
//	/apis/g/v1/res                             -> res
//	/api/v1/namespaces/ns                      -> namespaces
func APIResource(path string) string {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	switch {
	case len(parts) >= 3 && parts[0] == "api":
		parts = parts[2:]
	case len(parts) >= 4 && parts[0] == "apis":
		parts = parts[3:]
	default:
		return "other"
	}
	if len(parts) >= 3 && parts[0] == "namespaces" {
		parts = parts[2:]
	}
	switch len(parts) {
	case 1, 2:
		return parts[0]
	case 3:
		return parts[0] + "/" + parts[2]
	}
	if len(parts) == 0 {
		return "namespaces"
	}
	return "other"
}

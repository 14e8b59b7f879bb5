// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package metrics

// APIRequests counts a process's own requests to the API server by verb and resource, so
// that "no writes when nothing changes" can be watched (and asserted in the e2e). Labels
// are bounded: HTTP methods and the resources the process's RBAC allows. Both processes
// count theirs (controllers/agent.InstrumentAPI).
var APIRequests = counterVec("api_requests_total",
	"Requests the agent sent to the API server, by HTTP method (POST-dryrun, PATCH-dryrun: dry runs, which store nothing) "+
		"and resource[/subresource]; watches count once when opened.",
	"method", "resource")

package agent

import "github.com/prometheus/client_golang/prometheus"

// The metrics of the agent's controllers, defined here only. RegisterMetrics registers
// them, in the summarizer's process too (its API requests count as well);
// NewAPIReachability registers numapref_api_reachable. The engine's, the effect
// collector's and the NRI plugin's metrics are their packages' (internal/nodeagent,
// internal/nodeagent/nri).

// apiRequests counts the agent's own requests to the API server by verb and resource, so
// that "no writes when nothing changes" can be watched (and asserted in the e2e). Labels
// are bounded: HTTP methods and the resources this agent's RBAC allows.
var apiRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
	Namespace: "numapref", Name: "api_requests_total",
	Help: "Requests the agent sent to the API server, by HTTP method (POST-dryrun, PATCH-dryrun: dry runs, which store nothing) and resource[/subresource]; watches count once when opened.",
}, []string{"method", "resource"})

// reportWrites counts the node agent's writes of its NumaNodeReport by result (ok, error):
// a node that cannot report keeps enforcing, and says so here and in its log.
var reportWrites = prometheus.NewCounterVec(prometheus.CounterOpts{
	Namespace: "numapref", Name: "report_writes_total",
	Help: "Writes of this node's NumaNodeReport, by result (ok, error).",
}, []string{"result"})

// nodeRestrictionMissing is 1 while the node restriction check finds that the API accepts
// this agent's writes outside its own node (noderestriction.go), 0 once it found them
// refused. The alert NumaprefNodeRestrictionMissing fires on it.
var nodeRestrictionMissing = prometheus.NewGauge(prometheus.GaugeOpts{
	Namespace: "numapref", Name: "node_restriction_missing",
	Help: "1 when the API accepted this agent's dry-run writes of another node's report or of a foreign label on its own Node, which the node restriction policy refuses; 0 when it refused them.",
})

// reportRestrictionMissing sets numapref_node_restriction_missing from the check's verdict.
func reportRestrictionMissing(missing bool) {
	v := 0.0
	if missing {
		v = 1
	}
	nodeRestrictionMissing.Set(v)
}

// RegisterMetrics registers the agent's controllers' metrics in reg.
func RegisterMetrics(reg prometheus.Registerer) error {
	for _, c := range []prometheus.Collector{apiRequests, reportWrites, nodeRestrictionMissing} {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}

// newAPIReachableGauge is numapref_api_reachable, which NewAPIReachability registers and
// sets.
func newAPIReachableGauge() prometheus.Gauge {
	return prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: "numapref", Name: "api_reachable",
		Help: "1 while the API server answers the agent's requests, 0 from a request that failed (no connection, a timeout, a 502, 503 or 504) until the next answer. " +
			"Containers placed at their start (NRI) keep their placement meanwhile.",
	})
}

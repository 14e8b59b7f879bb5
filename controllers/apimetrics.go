package controllers

import (
	"net/http"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/rest"
)

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

func reportRestrictionMissing(missing bool) {
	v := 0.0
	if missing {
		v = 1
	}
	nodeRestrictionMissing.Set(v)
}

// RegisterMetrics registers the controllers' metrics in reg.
func RegisterMetrics(reg prometheus.Registerer) error {
	for _, c := range []prometheus.Collector{apiRequests, reportWrites, nodeRestrictionMissing} {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}

// InstrumentAPI makes every request made with cfg count in numapref_api_requests_total.
func InstrumentAPI(cfg *rest.Config) {
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
			apiRequests.WithLabelValues(apiMethod(req), APIResource(req.URL.Path)).Inc()
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

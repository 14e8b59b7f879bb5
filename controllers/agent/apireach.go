// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"errors"
	"net/http"
	"sync"
	"sync/atomic"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/rest"

	"github.com/numapref/numapref/internal/metrics"
)

// APIReachability follows whether the API server answers this agent, from the agent's own
// requests: a request that fails without its caller giving up (no connection, a TLS
// handshake or a health-check ping timed out), or a 502, 503 or 504 from a proxy in front
// of it, says the API is unreachable; any other answer says it is back. The informers
// retry their lists and watches without end, so an outage shows within about a minute
// (client-go's HTTP/2 health check closes a silent connection after 45 s) and its end at
// the first answer. The engine needs it for the containers it placed at their start
// (nodeagent.Engine.SetAPIReachable): their desire must not lapse while the API cannot
// confirm it.
type APIReachability struct {
	down  atomic.Bool
	mu    sync.Mutex // orders the notifications
	funcs []func(reachable bool)
	gauge prometheus.Gauge
	log   logr.Logger
}

// NewAPIReachability starts out reachable and registers numapref_api_reachable in reg.
func NewAPIReachability(reg prometheus.Registerer, log logr.Logger) (*APIReachability, error) {
	a := &APIReachability{log: log, gauge: metrics.NewAPIReachable()}
	a.gauge.Set(1)
	return a, reg.Register(a.gauge)
}

// Instrument makes every request made with cfg tell a whether the API answered.
func (a *APIReachability) Instrument(cfg *rest.Config) {
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
			resp, err := rt.RoundTrip(req)
			a.observe(req, resp, err)
			return resp, err
		})
	})
}

// Notify has f called with each change, in order, from the request that saw it.
func (a *APIReachability) Notify(f func(reachable bool)) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.funcs = append(a.funcs, f)
}

// Reachable says whether the last answer or failure said the API answers.
func (a *APIReachability) Reachable() bool { return !a.down.Load() }

func (a *APIReachability) observe(req *http.Request, resp *http.Response, err error) {
	switch {
	case err != nil && req.Context().Err() != nil:
		return // the caller gave up: says nothing of the server
	case err != nil:
		a.set(false, err)
	case resp.StatusCode == http.StatusBadGateway || resp.StatusCode == http.StatusServiceUnavailable ||
		resp.StatusCode == http.StatusGatewayTimeout:
		a.set(false, errors.New(resp.Status))
	default:
		a.set(true, nil)
	}
}

func (a *APIReachability) set(reachable bool, why error) {
	if a.Reachable() == reachable {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.down.CompareAndSwap(reachable, !reachable) {
		return // another request said it first
	}
	if reachable {
		a.gauge.Set(1)
		a.log.Info("The API server answers again")
	} else {
		a.gauge.Set(0)
		a.log.Info("The API server does not answer; containers placed at their start keep their placement until it does", "error", why.Error())
	}
	for _, f := range a.funcs {
		f(reachable)
	}
}

// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/client-go/rest"
)

// TestAPIReachabilityFollowsTheServer: requests made with an instrumented config tell
// whether a real HTTP server answers: a 503 or a refused connection says unreachable, an
// answer says reachable again, a request its caller gave up says nothing. Each change is
// notified once, in order, and shows in numapref_api_reachable.
func TestAPIReachabilityFollowsTheServer(t *testing.T) {
	var status atomic.Int32
	status.Store(http.StatusOK)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(int(status.Load()))
	}))
	defer srv.Close()

	a, err := NewAPIReachability(prometheus.NewRegistry(), logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	var seen []bool
	a.Notify(func(reachable bool) { seen = append(seen, reachable) })
	cfg := &rest.Config{Host: srv.URL}
	a.Instrument(cfg)
	c, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	get := func(ctx context.Context) {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/api", nil)
		if err != nil {
			t.Fatal(err)
		}
		if resp, err := c.Do(req); err == nil {
			resp.Body.Close()
		}
	}
	check := func(step string, reachable bool, notified ...bool) {
		t.Helper()
		if a.Reachable() != reachable {
			t.Errorf("%s: Reachable() = %v, want %v", step, a.Reachable(), reachable)
		}
		want := 0.0
		if reachable {
			want = 1
		}
		if got := testutil.ToFloat64(a.gauge); got != want {
			t.Errorf("%s: numapref_api_reachable = %v, want %v", step, got, want)
		}
		if !slices.Equal(seen, notified) {
			t.Errorf("%s: notified %v, want %v", step, seen, notified)
		}
	}

	get(t.Context())
	check("an answer", true)
	status.Store(http.StatusServiceUnavailable)
	get(t.Context())
	get(t.Context())
	check("503 twice", false, false)
	status.Store(http.StatusNotFound)
	get(t.Context())
	check("an answer, if not the one asked for", true, false, true)
	cancelled, cancel := context.WithCancel(t.Context())
	cancel()
	get(cancelled)
	check("a request its caller gave up", true, false, true)
	srv.Close()
	get(t.Context())
	check("no server", false, false, true, false)
}

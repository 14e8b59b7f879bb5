// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"k8s.io/client-go/rest"
)

// restGetter reads API paths as raw bytes.
type restGetter interface {
	getRaw(ctx context.Context, path string) ([]byte, error)
}

// rawAPI talks to the apiserver with plain HTTP requests, for what a typed client would
// hide: raw object sizes and watch streams whose bytes are only counted.
type rawAPI struct {
	http *http.Client
	host string
}

func newRawAPI(cfg *rest.Config) (*rawAPI, error) {
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("making an HTTP client: %w", err)
	}
	return &rawAPI{http: hc, host: strings.TrimSuffix(cfg.Host, "/")}, nil
}

func (a *rawAPI) do(ctx context.Context, path string, query url.Values) (*http.Response, error) {
	u := a.host + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := a.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", path, err)
	}
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		resp.Body.Close()
		return nil, fmt.Errorf("GET %s: %s: %s", path, resp.Status, body)
	}
	return resp, nil
}

func (a *rawAPI) getRaw(ctx context.Context, path string) ([]byte, error) {
	resp, err := a.do(ctx, path, nil)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	return io.ReadAll(resp.Body)
}

// listVersion is the resourceVersion of the collection at path, read as metadata only.
func (a *rawAPI) listVersion(ctx context.Context, path string, query url.Values) (string, error) {
	q := url.Values{"limit": {"1"}}
	for k, v := range query {
		q[k] = v
	}
	raw, err := a.getRaw(ctx, path+"?"+q.Encode())
	if err != nil {
		return "", err
	}
	var list struct {
		Metadata struct {
			ResourceVersion string `json:"resourceVersion"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(raw, &list); err != nil {
		return "", fmt.Errorf("decoding the list at %s: %w", path, err)
	}
	return list.Metadata.ResourceVersion, nil
}

// watchCounter holds watches open and counts what they receive.
type watchCounter struct {
	api      *rawAPI
	bytes    atomic.Int64 // received on every stream, framing included
	reopened atomic.Int64 // streams the server ended and that were opened again
	open     atomic.Int64 // streams open now
}

// watch keeps one watch of the collection at path (query: a field selector, say) open
// until ctx ends, starting at the collection's current version so that no initial events
// are sent. A stream the server ends is opened again from the collection's version then:
// events in between are missed, and counted in reopened.
func (w *watchCounter) watch(ctx context.Context, path string, query url.Values, started chan<- error) {
	buf := make([]byte, 4096)
	first := true
	for ctx.Err() == nil {
		rv, err := w.api.listVersion(ctx, path, query)
		var resp *http.Response
		if err == nil {
			q := url.Values{"watch": {"true"}, "resourceVersion": {rv}, "timeoutSeconds": {"7200"}, "allowWatchBookmarks": {"false"}}
			for k, v := range query {
				q[k] = v
			}
			resp, err = w.api.do(ctx, path, q)
		}
		if first {
			started <- err
			first = false
			if err != nil {
				return
			}
		}
		if err != nil {
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
			continue
		}
		w.open.Add(1)
		_, _ = io.CopyBuffer(counting{&w.bytes}, resp.Body, buf)
		resp.Body.Close()
		w.open.Add(-1)
		if ctx.Err() == nil {
			w.reopened.Add(1)
		}
	}
}

// counting is a writer that only counts.
type counting struct{ n *atomic.Int64 }

func (c counting) Write(p []byte) (int, error) {
	c.n.Add(int64(len(p)))
	return len(p), nil
}

// startWatches opens n watches, each of paths[i] with queries[i], on workers at a time,
// and returns once all are open.
func (w *watchCounter) startWatches(ctx context.Context, workers int, paths []string, queries []url.Values) error {
	started := make(chan error, len(paths))
	sem := make(chan struct{}, workers)
	for i := range paths {
		sem <- struct{}{}
		go func() {
			ready := make(chan error, 1)
			go w.watch(ctx, paths[i], queries[i], ready)
			err := <-ready
			<-sem
			started <- err
		}()
	}
	for range paths {
		if err := <-started; err != nil {
			return fmt.Errorf("opening a watch: %w", err)
		}
	}
	return nil
}

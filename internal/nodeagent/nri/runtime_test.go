// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package nri

import (
	"context"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/numapref/numapref/internal/numa/mempolicy"
)

// The tests drive the runtime side containerd and CRI-O embed in the test's process
// (internal/testutil/nriruntime); the plugin reaches it through a real unix socket and
// ttrpc.

// wait bounds every wait of these tests; none takes it when the plugin behaves.
const wait = 10 * time.Second

// runningPlugin is a Plugin whose Start runs until the test ends.
type runningPlugin struct {
	*Plugin
	cancel context.CancelFunc
	done   chan error // Start's return
}

// startPlugin starts a plugin on socket with placer and the tests' short backoff; edit
// adjusts its config.
func startPlugin(t testing.TB, socket string, placer Placer, edit ...func(*Config)) *runningPlugin {
	t.Helper()
	cfg := Config{
		Socket: socket, Placer: placer, Log: logr.Discard(),
		MinBackoff: 10 * time.Millisecond, MaxBackoff: 50 * time.Millisecond,
	}
	for _, e := range edit {
		e(&cfg)
	}
	p, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	rp := &runningPlugin{Plugin: p, cancel: cancel, done: make(chan error, 1)}
	go func() { rp.done <- p.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-rp.done:
			if err != nil {
				t.Errorf("Start = %v, want nil", err)
			}
		case <-time.After(wait):
			t.Errorf("Start did not return within %s of its ctx's end", wait)
		}
	})
	return rp
}

// stop cancels Start's ctx and returns what Start returned.
func (rp *runningPlugin) stop(t testing.TB) error {
	t.Helper()
	rp.cancel()
	select {
	case err := <-rp.done:
		rp.done <- err // for the cleanup
		return err
	case <-time.After(wait):
		t.Fatalf("Start did not return within %s of its ctx's end", wait)
		return nil
	}
}

// placements is a Placer that sends what it gets to a channel.
type placements chan Start

func (p placements) PlaceAtStart(_ context.Context, s Start) { p <- s }

func (placements) PolicyAtCreation(context.Context, Start) *mempolicy.OCIPolicy { return nil }

// next is the next placement, or fails the test.
func (p placements) next(t testing.TB) Start {
	t.Helper()
	select {
	case s := <-p:
		return s
	case <-time.After(wait):
		t.Fatalf("no placement within %s", wait)
		return Start{}
	}
}

// placerFunc is a Placer made of a function.
type placerFunc func(context.Context, Start)

func (f placerFunc) PlaceAtStart(ctx context.Context, s Start) { f(ctx, s) }

func (placerFunc) PolicyAtCreation(context.Context, Start) *mempolicy.OCIPolicy { return nil }

// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

// Package poll waits for a condition to hold: it checks the condition at an interval until
// it holds or a deadline passes, then gives the last reason it did not. Tests wait on their
// conditions this way (NoError, True), never on a fixed sleep before an assertion, and so
// does the test tooling (Context: the local node, the scale harness, the lab's API host).
package poll

import (
	"context"
	"errors"
	"testing"
	"time"
)

// Interval is how often a condition is checked.
const Interval = 20 * time.Millisecond

// NoError calls f until it returns nil. After timeout it fails t, naming what it waited
// for and f's last error.
func NoError(t testing.TB, timeout time.Duration, what string, f func() error) {
	t.Helper()
	if err := Until(timeout, f); err != nil {
		t.Fatalf("waited %s until %s: %v", timeout, what, err)
	}
}

// True calls cond until it holds, and fails t after timeout.
func True(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	NoError(t, timeout, what, func() error {
		if cond() {
			return nil
		}
		return errors.New("it did not happen")
	})
}

// Until calls f until it returns nil and returns nil, or f's last error once timeout has
// passed. f runs at least once.
func Until(timeout time.Duration, f func() error) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := Context(ctx, Interval, f); err != nil {
		return errors.Unwrap(err) // f's, not the deadline's
	}
	return nil
}

// Context calls f every interval until it returns nil and returns nil, or, once ctx ends,
// an error wrapping f's last error (errors.Unwrap gives it back) that says why it stopped.
// f runs at least once.
func Context(ctx context.Context, interval time.Duration, f func() error) error {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		err := f()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil { // before the select, which picks at random when both are ready
			return &stopped{last: err, why: ctx.Err()}
		}
		select {
		case <-ctx.Done():
			return &stopped{last: err, why: ctx.Err()}
		case <-tick.C:
		}
	}
}

// stopped is Context's error: the condition's last error, and why polling stopped.
type stopped struct{ last, why error }

func (e *stopped) Error() string { return e.last.Error() + " (" + e.why.Error() + ")" }
func (e *stopped) Unwrap() error { return e.last }

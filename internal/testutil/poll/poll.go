// Package poll waits, in tests, for a condition to hold: it checks the condition at a short
// interval until it holds or a deadline passes, then fails the test with the last reason.
// A test waits on its condition this way, never on a fixed sleep before an assertion.
package poll

import (
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
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(Interval)
	defer tick.Stop()
	for {
		err := f()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		<-tick.C
	}
}

// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package poll

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestUntilReturnsOnceTheConditionHolds(t *testing.T) {
	calls := 0
	err := Until(10*time.Second, func() error {
		if calls++; calls < 3 {
			return errors.New("not yet")
		}
		return nil
	})
	if err != nil || calls != 3 {
		t.Fatalf("Until = %v after %d calls, want nil after 3", err, calls)
	}
}

func TestUntilGivesTheLastErrorAfterTheDeadline(t *testing.T) {
	calls := 0
	start := time.Now()
	err := Until(100*time.Millisecond, func() error {
		calls++
		return errors.New("still not")
	})
	if err == nil || err.Error() != "still not" {
		t.Fatalf("Until = %v, want the last error", err)
	}
	if took := time.Since(start); took < 100*time.Millisecond || calls < 2 {
		t.Fatalf("gave up after %s and %d calls, want the whole timeout and more than one call", took, calls)
	}
}

func TestContextSaysWhyItStopped(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	calls := 0
	err := Context(ctx, time.Millisecond, func() error {
		if calls++; calls == 3 {
			cancel()
		}
		return errors.New("not ready")
	})
	if err == nil || errors.Unwrap(err) == nil || errors.Unwrap(err).Error() != "not ready" {
		t.Fatalf("Context = %v, want one wrapping the last error", err)
	}
	if want := "not ready (context canceled)"; err.Error() != want {
		t.Fatalf("Context = %q, want %q", err, want)
	}
	if calls != 3 {
		t.Fatalf("%d calls, want 3 (none after the cancel)", calls)
	}
}

// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build linux

package fsutil

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/numapref/numapref/internal/testutil/poll"
)

func TestTryLock(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lock")
	l, _, err := TryLock(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := lockHolder(path); got != os.Getpid() {
		t.Errorf("the lock file names pid %d, want %d", got, os.Getpid())
	}
	// flock locks belong to the open file: a second open, in this process too, is refused.
	if _, holder, err := TryLock(path); !errors.Is(err, ErrLocked) || holder != os.Getpid() {
		t.Errorf("second TryLock = holder %d, %v; want ErrLocked by %d", holder, err, os.Getpid())
	}
	if err := l.Release(); err != nil {
		t.Fatal(err)
	}
	again, _, err := TryLock(path)
	if err != nil {
		t.Fatalf("TryLock after Release: %v", err)
	}
	release(t, again)
}

// A waiter says at once that it waits, and whom for, then every Report; it takes the lock
// once the holder releases it.
func TestWaitLock(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lock")
	held, _, err := TryLock(path)
	if err != nil {
		t.Fatal(err)
	}
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	type report struct {
		holder int
		waited time.Duration
	}
	reports := make(chan report, 16)
	type result struct {
		l   *Lock
		err error
	}
	done := make(chan result, 1)
	go func() {
		l, err := WaitLock(context.Background(), path, WaitOptions{Poll: time.Second, Report: 30 * time.Second, Clock: clk,
			Waiting: func(holder int, waited time.Duration) { reports <- report{holder, waited} }})
		done <- result{l, err}
	}()
	step := func(d time.Duration) {
		t.Helper()
		poll.True(t, 10*time.Second, "the waiter sleeps", clk.HasWaiters)
		clk.Step(d)
	}
	if r := <-reports; r != (report{os.Getpid(), 0}) {
		t.Errorf("first report %+v, want the holder %d at once", r, os.Getpid())
	}
	for range 29 {
		step(time.Second)
	}
	select {
	case r := <-reports:
		t.Errorf("reported again after %s: %+v", r.waited, r)
	default:
	}
	step(time.Second)
	if r := <-reports; r.waited != 30*time.Second {
		t.Errorf("second report %+v, want after 30s", r)
	}
	release(t, held)
	step(time.Second)
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	defer release(t, r.l)
	data, _ := os.ReadFile(path)
	if strings.TrimSpace(string(data)) != strconv.Itoa(os.Getpid()) {
		t.Errorf("lock file holds %q after the handover", data)
	}
}

// A holder that removes its lock file leaves the waiter nothing to wait on: the waiter
// locks the new file at the path, not the removed one.
func TestTryLockAfterTheFileWasRemoved(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lock")
	held, _, err := TryLock(path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path) // what a waiter opened before the removal
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if same, err := stillAt(f, path); err != nil || same {
		t.Errorf("stillAt after the removal = %v, %v; want false", same, err)
	}
	l, _, err := TryLock(path)
	if err != nil {
		t.Fatalf("TryLock on a new file: %v", err)
	}
	release(t, l)
	release(t, held)
}

func TestWaitLockEndsWithItsContext(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lock")
	held, _, err := TryLock(path)
	if err != nil {
		t.Fatal(err)
	}
	defer release(t, held)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := WaitLock(ctx, path, WaitOptions{}); !errors.Is(err, context.Canceled) {
		t.Errorf("WaitLock with an ended context = %v, want context.Canceled", err)
	}
}

// release releases l and fails the test if that fails.
func release(t *testing.T, l *Lock) {
	t.Helper()
	if err := l.Release(); err != nil {
		t.Errorf("Release: %v", err)
	}
}

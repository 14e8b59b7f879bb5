// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package devices

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
)

// fakeReader answers from a table, counting its reads; block holds every read until it
// is closed (or the read's context ends).
type fakeReader struct {
	mu      sync.Mutex
	answers map[string]PodDevices
	err     error
	block   chan struct{}
	reads   atomic.Int32
}

func (r *fakeReader) PodDevices(ctx context.Context, _, name string) (PodDevices, error) {
	r.reads.Add(1)
	if r.block != nil {
		select {
		case <-r.block:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err != nil {
		return nil, r.err
	}
	return r.answers[name], nil
}

func pod(name string) Pod {
	return Pod{UID: types.UID("uid-" + name), Namespace: "ns", Name: name, Container: "main"}
}

// waitFor polls cond until it holds or a second passed.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// A pod is read once, in the background: Pending until the answer, then the answer, with
// no read more however often it is looked up; the cache says when an answer came.
func TestCacheReadsEachPodOnce(t *testing.T) {
	r := &fakeReader{answers: map[string]PodDevices{"p": {"main": {{ResourceName: "example.com/gpu", ID: "g0", Nodes: []int{1}}}}},
		block: make(chan struct{})}
	var changed atomic.Int32
	c := NewCache(r, CacheOptions{Changed: func() { changed.Add(1) }})
	if a := c.Lookup(pod("p")); a.State != Pending {
		t.Fatalf("first look: state %v, want Pending", a.State)
	}
	if a := c.Lookup(pod("p")); a.State != Pending {
		t.Fatalf("second look while reading: state %v, want Pending", a.State)
	}
	close(r.block)
	waitFor(t, "the answer", func() bool { return c.Lookup(pod("p")).State == Read })
	a := c.Lookup(pod("p"))
	if len(a.Devices) != 1 || a.Devices[0].ID != "g0" || a.AtCreation {
		t.Errorf("allocation %+v, want the GPU, read by a pass", a)
	}
	for range 100 {
		c.Lookup(pod("p"))
	}
	if n := r.reads.Load(); n != 1 {
		t.Errorf("%d reads, want 1", n)
	}
	if changed.Load() != 1 {
		t.Errorf("changed called %d times, want 1", changed.Load())
	}
	if a := c.Lookup(Pod{UID: "uid-p", Namespace: "ns", Name: "p", Container: "other"}); a.State != Read || len(a.Devices) != 0 {
		t.Errorf("another container of the pod: %+v, want read, no devices", a)
	}
}

// A hung reader is cut off by the timeout: the pod is Unreadable, saying why, and read
// again only after the backoff, which doubles.
func TestCacheTimeoutAndBackoff(t *testing.T) {
	r := &fakeReader{block: make(chan struct{})} // never answers
	clk := clocktesting.NewFakePassiveClock(time.Now())
	c := NewCache(r, CacheOptions{Timeout: 20 * time.Millisecond, Clock: clk})
	c.Lookup(pod("p"))
	waitFor(t, "the timeout", func() bool { return c.Lookup(pod("p")).State == Unreadable })
	if a := c.Lookup(pod("p")); a.Err != context.DeadlineExceeded.Error() {
		t.Errorf("error %q, want the deadline", a.Err)
	}
	clk.SetTime(clk.Now().Add(minBackoff - time.Millisecond))
	c.Lookup(pod("p"))
	if n := r.reads.Load(); n != 1 {
		t.Fatalf("%d reads before the backoff, want 1", n)
	}
	clk.SetTime(clk.Now().Add(time.Millisecond))
	c.Lookup(pod("p"))
	waitFor(t, "the retry", func() bool { return r.reads.Load() == 2 })
	waitFor(t, "the second timeout", func() bool { c.mu.Lock(); defer c.mu.Unlock(); return !c.pods["uid-p"].reading })
	clk.SetTime(clk.Now().Add(minBackoff))
	c.Lookup(pod("p"))
	if n := r.reads.Load(); n != 2 {
		t.Errorf("%d reads one backoff after the second failure, want 2: the backoff doubles", n)
	}
	if got := backoff(20); got != maxBackoff {
		t.Errorf("backoff(20) = %s, want the bound %s", got, maxBackoff)
	}
}

// A creation waits for the answer, at most the wait it is given; what it read says so.
func TestCacheAwait(t *testing.T) {
	r := &fakeReader{answers: map[string]PodDevices{"p": {"main": {{ResourceName: "example.com/gpu", ID: "g0", Nodes: []int{0}}}}}}
	c := NewCache(r, CacheOptions{})
	a := c.Await(context.Background(), pod("p"), 5*time.Second)
	if a.State != Read || !a.AtCreation {
		t.Errorf("awaited: %+v, want read at creation", a)
	}

	hung := &fakeReader{block: make(chan struct{})}
	defer close(hung.block)
	c = NewCache(hung, CacheOptions{Timeout: time.Minute})
	start := time.Now()
	if a := c.Await(context.Background(), pod("p"), 30*time.Millisecond); a.State != Pending {
		t.Errorf("a hung kubelet: %+v, want Pending", a)
	}
	if waited := time.Since(start); waited > 10*time.Second {
		t.Errorf("waited %s for a hung kubelet", waited)
	}
}

// Pods that left are forgotten, so that a pod of a new UID is read anew.
func TestCacheRetain(t *testing.T) {
	r := &fakeReader{answers: map[string]PodDevices{}}
	c := NewCache(r, CacheOptions{})
	c.Await(context.Background(), pod("p"), 5*time.Second)
	c.Await(context.Background(), pod("q"), 5*time.Second)
	c.Retain(map[types.UID]bool{"uid-q": true})
	c.Lookup(pod("q"))
	if n := r.reads.Load(); n != 2 {
		t.Fatalf("%d reads, want 2", n)
	}
	c.Await(context.Background(), pod("p"), 5*time.Second)
	if n := r.reads.Load(); n != 3 {
		t.Errorf("%d reads after p was forgotten and asked again, want 3", n)
	}
}

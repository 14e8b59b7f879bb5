// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package migration

import (
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/numapref/numapref/internal/numa"
	"github.com/numapref/numapref/internal/numa/migrate"
	"github.com/numapref/numapref/internal/testutil/poll"
)

// fakeClock moves only when told; each After it is asked for is announced on armed.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []fakeTimer
	armed  chan time.Duration
}

type fakeTimer struct {
	at time.Time
	ch chan time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{now: t0, armed: make(chan time.Duration, 16)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan time.Time, 1)
	c.timers = append(c.timers, fakeTimer{c.now.Add(d), ch})
	c.armed <- d
	return ch
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	kept := c.timers[:0]
	for _, tm := range c.timers {
		if tm.at.After(c.now) {
			kept = append(kept, tm)
			continue
		}
		tm.ch <- c.now
	}
	c.timers = kept
}

// gatedMover moves like fakeMover, but each call announces itself on entered and waits
// for a value on release.
type gatedMover struct {
	inner   *fakeMover
	mu      sync.Mutex
	entered chan int
	release chan struct{}
	ended   int
}

func (g *gatedMover) Move(pid int, from numa.NodeMask, to int, cursor uint64, budget int) (migrate.Step, error) {
	g.entered <- pid
	<-g.release
	g.mu.Lock()
	defer g.mu.Unlock()
	s, err := g.inner.Move(pid, from, to, cursor, budget)
	g.ended++
	return s, err
}

type fakeMetrics struct {
	mu            sync.Mutex
	moved, failed int
	ended         []Reason
}

func (f *fakeMetrics) PagesMoved(n int)  { f.mu.Lock(); f.moved += n; f.mu.Unlock() }
func (f *fakeMetrics) PagesFailed(n int) { f.mu.Lock(); f.failed += n; f.mu.Unlock() }
func (f *fakeMetrics) RequestEnded(r Reason) {
	f.mu.Lock()
	f.ended = append(f.ended, r)
	f.mu.Unlock()
}

func newGated(sizes map[int]int) *gatedMover {
	return &gatedMover{inner: newFakeMover(sizes), entered: make(chan int, 16), release: make(chan struct{})}
}

func endsWith(t *testing.T, w *Worker, key string, reason Reason) {
	t.Helper()
	poll.True(t, 10*time.Second, key+" ends "+string(reason), func() bool {
		st, ok := w.Status(key)
		return ok && st.State == StateEnded && st.Reason == reason
	})
}

// Submit returns while a step runs: the step is on the worker's goroutine. The step's
// pages reach Metrics; Stop waits for a step under way.
func TestWorkerMovesOffTheCallersGoroutine(t *testing.T) {
	g := newGated(map[int]int{1: 100, 2: 100})
	metrics := &fakeMetrics{}
	w, err := New(g, Options{Rate: 1e6}, newFakeClock(), metrics)
	if err != nil {
		t.Fatal(err)
	}
	w.Start()
	w.Submit(req("a", 1, 1))
	if pid := <-g.entered; pid != 1 {
		t.Fatalf("the first step is of pid %d", pid)
	}
	w.Submit(req("b", 1, 2)) // returns though the step of a waits for its release
	if st, _ := w.Status("a"); st.State != StateMoving {
		t.Errorf("a while its step runs: %+v; want Moving", st)
	}
	g.release <- struct{}{}
	if pid := <-g.entered; pid != 2 {
		t.Fatalf("the second step is of pid %d", pid)
	}
	g.release <- struct{}{}
	endsWith(t, w, "a", ReasonMoved)
	endsWith(t, w, "b", ReasonMoved)

	w.Submit(req("c", 1, 1, 2)) // pages already home: one step per process finds none
	<-g.entered
	stopped := make(chan struct{})
	go func() { w.Stop(); close(stopped) }()
	<-w.stop // Stop has asked; the step under way still waits for its release
	g.release <- struct{}{}
	<-stopped
	g.mu.Lock()
	ended := g.ended
	g.mu.Unlock()
	if ended != 3 {
		t.Errorf("Stop returned with %d of 3 steps ended; want it to wait for the one under way", ended)
	}
	metrics.mu.Lock()
	defer metrics.mu.Unlock()
	if metrics.moved != 200 || len(metrics.ended) != 2 {
		t.Errorf("metrics: %d moved, ended %v; want 200 and two Moved", metrics.moved, metrics.ended)
	}
}

// Without tokens the worker waits on its clock for them, and goes on when the clock says.
func TestWorkerWaitsOnTheClockForTheRate(t *testing.T) {
	m := newFakeMover(map[int]int{1: 300})
	clock := newFakeClock()
	w, err := New(m, Options{Rate: 100, Burst: 100, Step: 100}, clock, nil)
	if err != nil {
		t.Fatal(err)
	}
	w.Start()
	defer w.Stop()
	w.Submit(req("a", 1, 1))
	for moved := 100; moved < 300; moved += 100 {
		poll.True(t, 10*time.Second, "the worker has moved "+strconv.Itoa(moved)+" pages", func() bool {
			st, _ := w.Status("a")
			return st.Moved == moved
		})
		// The worker waits for 100 pages and 100 addresses at 64 to a page, at 100 pages
		// a second. (A wake-up by Submit may have asked the same wait once more.)
		d := <-clock.armed
		if want := 1015625 * time.Microsecond; d != want {
			t.Fatalf("after %d pages the wait is %s; want %s", moved, d, want)
		}
		clock.Advance(d)
	}
	endsWith(t, w, "a", ReasonMoved)
	if st, _ := w.Status("a"); st.Moved != 300 {
		t.Errorf("moved %d; want 300", st.Moved)
	}
}

func TestNewNeedsARate(t *testing.T) {
	if _, err := New(newFakeMover(nil), Options{}, nil, nil); err == nil {
		t.Error("New without a rate: no error")
	}
}

// Stop of a worker never started returns; Cancel reaches Metrics.
func TestStopAndCancelOfAnIdleWorker(t *testing.T) {
	metrics := &fakeMetrics{}
	w, err := New(newFakeMover(nil), Options{Rate: 1}, newFakeClock(), metrics)
	if err != nil {
		t.Fatal(err)
	}
	w.Submit(req("a", 1, 1))
	w.Cancel("a")
	w.Stop()
	w.Stop()
	if len(metrics.ended) != 1 || metrics.ended[0] != ReasonCancelled {
		t.Errorf("ended = %v; want Cancelled", metrics.ended)
	}
}

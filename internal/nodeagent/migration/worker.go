// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package migration

import (
	"errors"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/numapref/numapref/internal/numa"
	"github.com/numapref/numapref/internal/numa/migrate"
)

// Mover runs one step of a process's move: migrate.Mover does it with move_pages(2).
type Mover interface {
	// Move moves pages of process pid on the nodes in from to node to, from address
	// cursor on, and stops after budget pages found there (migrate.Mover.Move).
	Move(pid int, from numa.NodeMask, to int, cursor uint64, budget int) (migrate.Step, error)
}

// Metrics is told what the worker did. Its methods are called on the worker's goroutine
// or the caller's, never under the worker's lock, and must not block.
type Metrics interface {
	PagesMoved(n int)  // pages moved to their home
	PagesFailed(n int) // pages that did not move, at each pass that found them
	RequestEnded(r Reason)
}

// Clock is the time the worker reads and waits on: k8s.io/utils/clock's clocks have it.
type Clock interface {
	Now() time.Time
	After(d time.Duration) <-chan time.Time
}

type noMetrics struct{}

func (noMetrics) PagesMoved(int)      {}
func (noMetrics) PagesFailed(int)     {}
func (noMetrics) RequestEnded(Reason) {}

// Worker moves the pages that requests ask for, one step at a time on its own goroutine
// (see the package's doc). Submit, Cancel and Status may be called from any goroutine and
// never wait for a step.
type Worker struct {
	mover   Mover
	metrics Metrics
	clock   Clock

	mu sync.Mutex
	s  *sched

	kick    chan struct{}
	stop    chan struct{}
	done    chan struct{}
	started bool
}

// New returns a worker that moves pages with mover within o, reading time from clk (nil:
// the system's) and telling metrics (nil: nothing). Start runs it.
func New(mover Mover, o Options, clk Clock, metrics Metrics) (*Worker, error) {
	if o.Rate <= 0 {
		return nil, errors.New("migration worker: the rate must be above 0 pages per second")
	}
	if clk == nil {
		clk = clock.RealClock{}
	}
	if metrics == nil {
		metrics = noMetrics{}
	}
	return &Worker{
		mover: mover, metrics: metrics, clock: clk, s: newSched(o, clk.Now()),
		kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}),
	}, nil
}

// Start runs the worker's goroutine; call it once.
func (w *Worker) Start() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.started {
		w.started = true
		go w.run()
	}
}

// Stop ends the worker's goroutine after the step it runs, if any, and returns when it has
// ended. Requests left are not moved.
func (w *Worker) Stop() {
	w.mu.Lock()
	started := w.started
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
	w.mu.Unlock()
	if started {
		<-w.done
	}
}

// Submit queues r, replaces the request for its key if that asks otherwise, or does
// nothing if it asks the same.
func (w *Worker) Submit(r Request) {
	w.mu.Lock()
	rep := w.s.submit(r)
	w.mu.Unlock()
	w.tell(rep)
	w.wake()
}

// Cancel ends and forgets the request for key, if there is one. Call it when the
// container is gone: a key's status is kept until then.
func (w *Worker) Cancel(key string) {
	w.mu.Lock()
	rep := w.s.cancel(key)
	w.mu.Unlock()
	w.tell(rep)
	w.wake()
}

// Status is the progress of key's request; false for a key with none.
func (w *Worker) Status(key string) (Status, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.s.status(key)
}

func (w *Worker) wake() {
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

func (w *Worker) tell(rep report) {
	if rep.moved > 0 {
		w.metrics.PagesMoved(rep.moved)
	}
	if rep.failed > 0 {
		w.metrics.PagesFailed(rep.failed)
	}
	for _, r := range rep.ended {
		w.metrics.RequestEnded(r)
	}
}

func (w *Worker) run() {
	defer close(w.done)
	for {
		select {
		case <-w.stop:
			return
		default:
		}
		w.mu.Lock()
		next, wait, ok := w.s.next(w.clock.Now())
		w.mu.Unlock()
		if ok {
			w.runStep(next)
			continue
		}
		var timer <-chan time.Time
		if wait > 0 {
			timer = w.clock.After(wait)
		}
		select {
		case <-w.stop:
			return
		case <-w.kick:
		case <-timer:
		}
	}
}

func (w *Worker) runStep(next work) {
	start := w.clock.Now()
	step, err := w.mover.Move(next.pid, next.from, next.home, next.cursor, next.budget)
	end := w.clock.Now()
	w.mu.Lock()
	rep := w.s.finish(next, step, err, end, end.Sub(start))
	w.mu.Unlock()
	w.tell(rep)
}

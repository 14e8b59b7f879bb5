// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package devices

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
)

// Cache holds the devices of each pod of the node that a FollowDevices container asked
// for, read once per pod in the background. A failed read is tried again after a backoff
// (a kubelet restarting, a socket mounted late), never more often.
type Cache struct {
	reader  Reader
	timeout time.Duration
	clock   clock.PassiveClock
	observe func(result string)
	// changed is called, outside the lock, when a read ended: a pass can use its answer.
	changed func()

	mu   sync.Mutex
	pods map[types.UID]*podEntry
}

// podEntry is one pod's read, done or under way.
type podEntry struct {
	// done is closed when the read under way ends; reading says one is.
	done    chan struct{}
	reading bool
	devices PodDevices
	err     error
	// atCreation says the last read began at a container's creation (Await); failures
	// count the reads that failed in a row, and retryAt is when the next may begin.
	atCreation bool
	failures   int
	retryAt    time.Time
}

// CacheOptions configures NewCache.
type CacheOptions struct {
	// Timeout bounds each read of a pod (DefaultTimeout when 0).
	Timeout time.Duration
	Clock   clock.PassiveClock
	// Observe counts each read by result (ok, error); nil: not counted.
	Observe func(result string)
	// Changed is called when a read ends; nil: never.
	Changed func()
}

// DefaultTimeout bounds a read of one pod's devices: the kubelet answers from memory in
// milliseconds; one that takes seconds is stuck.
const DefaultTimeout = 2 * time.Second

// Backoff bounds: a failed read is tried again after minBackoff, doubling to maxBackoff.
const (
	minBackoff = 2 * time.Second
	maxBackoff = 2 * time.Minute
)

// NewCache makes a cache that reads pods with reader.
func NewCache(reader Reader, o CacheOptions) *Cache {
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.Observe == nil {
		o.Observe = func(string) {}
	}
	if o.Changed == nil {
		o.Changed = func() {}
	}
	return &Cache{reader: reader, timeout: o.Timeout, clock: o.Clock, observe: o.Observe, changed: o.Changed,
		pods: map[types.UID]*podEntry{}}
}

// Pod names a pod and the state of the container asked about.
type Pod struct {
	UID             types.UID
	Namespace, Name string
	Container       string
}

// Lookup returns what is known of the devices of p's container, without waiting: a pod
// not read yet, or whose failed read is due again, has a read started in the background
// and is Pending until it ends.
func (c *Cache) Lookup(p Pod) Allocation {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.entry(p, false)
	return e.allocation(p.Container)
}

// Await is Lookup after waiting up to wait (and never past ctx) for the read of p's pod
// to end: for a container's creation, which may wait a little for the kubelet's answer
// but never for a hung kubelet.
func (c *Cache) Await(ctx context.Context, p Pod, wait time.Duration) Allocation {
	c.mu.Lock()
	e := c.entry(p, true)
	done, reading := e.done, e.reading
	c.mu.Unlock()
	if reading {
		t := time.NewTimer(wait)
		defer t.Stop()
		select {
		case <-done:
		case <-t.C:
		case <-ctx.Done():
		}
	}
	return c.Lookup(p)
}

// entry returns p's pod's entry, starting its read when none was made or a failed one is
// due again; creating says a container's creation asks. mu is held.
func (c *Cache) entry(p Pod, creating bool) *podEntry {
	e, ok := c.pods[p.UID]
	switch {
	case !ok:
		e = &podEntry{}
		c.pods[p.UID] = e
	case e.reading || e.err == nil || c.clock.Now().Before(e.retryAt):
		return e
	}
	e.reading, e.done = true, make(chan struct{})
	go c.read(p, e, creating)
	return e
}

// read reads p's pod's devices into e, bounded by the timeout.
func (c *Cache) read(p Pod, e *podEntry, creating bool) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	devices, err := c.reader.PodDevices(ctx, p.Namespace, p.Name)
	cancel()
	result := "ok"
	if err != nil {
		result = "error"
	}
	c.observe(result)
	c.mu.Lock()
	e.reading, e.devices, e.err, e.atCreation = false, devices, err, creating
	if err != nil {
		e.failures++
		e.retryAt = c.clock.Now().Add(backoff(e.failures))
	} else {
		e.failures = 0
	}
	close(e.done)
	c.mu.Unlock()
	c.changed()
}

// backoff is the wait before the read after failures failed ones.
func backoff(failures int) time.Duration {
	d := minBackoff
	for i := 1; i < failures && d < maxBackoff; i++ {
		d *= 2
	}
	return min(d, maxBackoff)
}

// allocation is what e knows of container. mu is held.
func (e *podEntry) allocation(container string) Allocation {
	switch {
	case e.reading && e.devices == nil && e.err == nil:
		return Allocation{State: Pending}
	case e.err != nil:
		return Allocation{State: Unreadable, Err: e.err.Error()}
	}
	return Allocation{State: Read, Devices: e.devices[container], AtCreation: e.atCreation}
}

// Retain forgets every pod but those of uids: the pods gone from the node.
func (c *Cache) Retain(uids map[types.UID]bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for uid, e := range c.pods {
		if !uids[uid] && !e.reading {
			delete(c.pods, uid)
		}
	}
}

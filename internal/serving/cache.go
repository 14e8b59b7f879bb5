// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package serving

import (
	"container/list"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// lruCache is a bounded map whose entries expire. When it is full, the least recently used
// entry goes. A flood of distinct keys therefore pushes out only the entries nobody used
// since the flood began, and a user who comes back every scrape keeps theirs; a cache that
// cleared everything when full would let 1,024 junk tokens flush every legitimate answer.
type lruCache[V any] struct {
	mu    sync.Mutex
	clock clock.PassiveClock
	max   int
	order *list.List // of *lruEntry[V]; front: most recently used
	m     map[string]*list.Element
}

type lruEntry[V any] struct {
	key     string
	v       V
	expires time.Time
}

func newLRUCache[V any](c clock.PassiveClock, max int) *lruCache[V] {
	return &lruCache[V]{clock: c, max: max, order: list.New(), m: map[string]*list.Element{}}
}

// get returns the live value of key and marks it used; an expired entry is removed.
func (c *lruCache[V]) get(key string) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var zero V
	el, ok := c.m[key]
	if !ok {
		return zero, false
	}
	e := el.Value.(*lruEntry[V])
	if !c.clock.Now().Before(e.expires) {
		c.order.Remove(el)
		delete(c.m, key)
		return zero, false
	}
	c.order.MoveToFront(el)
	return e.v, true
}

// put stores v under key for ttl (nothing for ttl <= 0), evicting the least recently used
// entry when the cache is full.
func (c *lruCache[V]) put(key string, v V, ttl time.Duration) {
	if ttl <= 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	expires := c.clock.Now().Add(ttl)
	if el, ok := c.m[key]; ok {
		el.Value = &lruEntry[V]{key: key, v: v, expires: expires}
		c.order.MoveToFront(el)
		return
	}
	for c.order.Len() >= c.max {
		oldest := c.order.Back()
		c.order.Remove(oldest)
		delete(c.m, oldest.Value.(*lruEntry[V]).key)
	}
	c.m[key] = c.order.PushFront(&lruEntry[V]{key: key, v: v, expires: expires})
}

// len is the number of entries, expired ones included until they are looked up or evicted.
func (c *lruCache[V]) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.order.Len()
}

// answerCache keeps positive and negative review answers apart, each in its own LRU. Only
// a real token (or a real access) makes a positive answer, so a flood of refused tokens,
// however many, pushes out other refusals and never a legitimate user's answer.
type answerCache[V any] struct {
	positive, negative *lruCache[V]
}

func newAnswerCache[V any](c clock.PassiveClock, max int) answerCache[V] {
	return answerCache[V]{positive: newLRUCache[V](c, max), negative: newLRUCache[V](c, max)}
}

func (c answerCache[V]) get(key string) (V, bool) {
	if v, ok := c.positive.get(key); ok {
		return v, true
	}
	return c.negative.get(key)
}

func (c answerCache[V]) put(key string, v V, positive bool, ttl time.Duration) {
	if positive {
		c.positive.put(key, v, ttl)
	} else {
		c.negative.put(key, v, ttl)
	}
}

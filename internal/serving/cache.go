package serving

import (
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// ttlCache is a small map whose entries expire. When full, expired entries go first, and
// if none has expired everything goes: a cache that overflows is under a flood of distinct
// keys, where keeping old answers helps nobody.
type ttlCache[V any] struct {
	mu    sync.Mutex
	clock clock.PassiveClock
	max   int
	m     map[string]ttlEntry[V]
}

type ttlEntry[V any] struct {
	v       V
	expires time.Time
}

func newTTLCache[V any](c clock.PassiveClock, max int) *ttlCache[V] {
	return &ttlCache[V]{clock: c, max: max, m: map[string]ttlEntry[V]{}}
}

func (c *ttlCache[V]) get(key string) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[key]
	if !ok || !c.clock.Now().Before(e.expires) {
		var zero V
		return zero, false
	}
	return e.v, true
}

func (c *ttlCache[V]) put(key string, v V, ttl time.Duration) {
	if ttl <= 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.clock.Now()
	if _, ok := c.m[key]; !ok && len(c.m) >= c.max {
		for k, e := range c.m {
			if !now.Before(e.expires) {
				delete(c.m, k)
			}
		}
		if len(c.m) >= c.max {
			clear(c.m)
		}
	}
	c.m[key] = ttlEntry[V]{v: v, expires: now.Add(ttl)}
}

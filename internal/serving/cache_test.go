// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package serving

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	clocktesting "k8s.io/utils/clock/testing"
)

func TestLRUCacheEvictsTheLeastRecentlyUsed(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Now())
	c := newLRUCache[int](clk, 3)
	c.put("a", 1, time.Minute)
	c.put("b", 2, time.Minute)
	c.put("c", 3, time.Minute)
	c.get("a") // a is now the most recently used; b the least
	c.put("d", 4, time.Minute)
	c.put("c", 30, time.Minute) // an update, no eviction
	got := map[string]int{}
	for _, k := range []string{"a", "b", "c", "d"} {
		if v, ok := c.get(k); ok {
			got[k] = v
		}
	}
	if diff := cmp.Diff(map[string]int{"a": 1, "c": 30, "d": 4}, got); diff != "" {
		t.Errorf("entries (-want +got):\n%s", diff)
	}
	if n := c.len(); n != 3 {
		t.Errorf("%d entries, want the bound 3", n)
	}
}

func TestLRUCacheExpires(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Now())
	c := newLRUCache[string](clk, 8)
	c.put("k", "v", 10*time.Second)
	c.put("never", "v", 0) // not kept
	clk.SetTime(clk.Now().Add(9 * time.Second))
	if _, ok := c.get("k"); !ok {
		t.Error("an entry was gone before its TTL")
	}
	clk.SetTime(clk.Now().Add(time.Second))
	if _, ok := c.get("k"); ok {
		t.Error("an entry outlived its TTL")
	}
	if _, ok := c.get("never"); ok {
		t.Error("an entry with TTL 0 was kept")
	}
	if n := c.len(); n != 0 {
		t.Errorf("%d entries after expiry, want 0", n)
	}
}

// TestFloodKeepsTheLegitimateAnswer: 2,000 refused tokens, twice the bound, are reviewed
// and cached; the user's answer, cached before them, is still served. (The old cache
// cleared itself when full: 1,024 junk answers flushed it.)
func TestFloodKeepsTheLegitimateAnswer(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Now())
	c := newAnswerCache[*User](clk, maxCacheEntries)
	alice := &User{Name: "alice"}
	c.put("alice", alice, true, time.Minute)
	for i := range 2 * maxCacheEntries {
		c.put(fmt.Sprintf("junk-%d", i), nil, false, 10*time.Second)
	}
	if u, ok := c.get("alice"); !ok || u != alice {
		t.Errorf("alice's answer: %v %v, want it kept through the flood", u, ok)
	}
	if n := c.negative.len(); n != maxCacheEntries {
		t.Errorf("%d refusals cached, want the bound %d", n, maxCacheEntries)
	}
}

// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package serving

import (
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

func TestClientLimiter(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Now())
	l := newClientLimiter(clk, ReviewRate{PerSecond: 2, Burst: 3})
	for i := range 3 {
		if !l.allow("10.0.0.1") {
			t.Fatalf("review %d of the burst refused", i+1)
		}
	}
	if l.allow("10.0.0.1") {
		t.Error("a review past the burst was allowed")
	}
	if !l.allow("10.0.0.2") {
		t.Error("another client was refused: the bucket is per client")
	}
	clk.SetTime(clk.Now().Add(500 * time.Millisecond))
	if !l.allow("10.0.0.1") {
		t.Error("no review after half a second at 2/s")
	}
	if l.allow("10.0.0.1") {
		t.Error("two reviews after half a second at 2/s")
	}
	// A bucket idle until full again is dropped; the new one is the same.
	clk.SetTime(clk.Now().Add(l.idle))
	for i := range 3 {
		if !l.allow("10.0.0.1") {
			t.Fatalf("after a long idle, review %d of the burst refused", i+1)
		}
	}
}

func TestClientKey(t *testing.T) {
	for addr, want := range map[string]string{
		"10.1.2.3:51234":              "10.1.2.3",
		"[::ffff:10.1.2.3]:443":       "10.1.2.3",
		"[2001:db8:1:2:aaaa::1]:5000": "2001:db8:1:2::/64",
		"[2001:db8:1:2:bbbb::9]:6000": "2001:db8:1:2::/64",
		"[fe80::1%eth0]:7":            "fe80::/64",
		"pipe":                        "pipe",
		"[2001:db8:1:3:aaaa::1]:5000": "2001:db8:1:3::/64",
		"192.0.2.7:1":                 "192.0.2.7",
	} {
		if got := clientKey(addr); got != want {
			t.Errorf("clientKey(%q) = %q, want %q", addr, got, want)
		}
	}
}

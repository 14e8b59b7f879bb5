// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package serving

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"sync"
	"time"

	"golang.org/x/time/rate"
	"k8s.io/utils/clock"
)

// ErrReviewRateLimited: the client has spent its reviews for now; the server answers 429.
var ErrReviewRateLimited = errors.New("too many reviews for this client")

// ReviewRate is how many reviews (TokenReview or SubjectAccessReview, answers from the
// cache are free) one client may cause.
type ReviewRate struct {
	// PerSecond is the sustained rate, Burst what an idle client may spend at once.
	PerSecond float64
	Burst     int
}

// DefaultReviewRate: a scrape costs two reviews a minute and an inspection three, so a
// client stays far below it unless it sends new tokens all the time. It leaves room for
// several users behind one address (a NAT, a bastion, the node itself): what it bounds is a
// flood of forged tokens, which pass the local check.
func DefaultReviewRate() ReviewRate { return ReviewRate{PerSecond: 5, Burst: 50} }

// maxClients bounds the limiters kept; past it the least recently seen client's goes.
const maxClients = 4096

// clientLimiter keeps a token bucket per client (clientKey).
type clientLimiter struct {
	mu    sync.Mutex
	clock clock.PassiveClock
	rate  ReviewRate
	// idle is how long a bucket takes to fill up again: a bucket unused that long is
	// dropped, and a new one is the same.
	idle    time.Duration
	buckets *lruCache[*rate.Limiter]
}

func newClientLimiter(c clock.PassiveClock, r ReviewRate) *clientLimiter {
	idle := time.Duration(float64(r.Burst)/r.PerSecond*float64(time.Second)) + time.Second
	return &clientLimiter{clock: c, rate: r, idle: idle, buckets: newLRUCache[*rate.Limiter](c, maxClients)}
}

// allow takes one review from client's bucket and reports whether there was one.
func (l *clientLimiter) allow(client string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	b, ok := l.buckets.get(client)
	if !ok {
		b = rate.NewLimiter(rate.Limit(l.rate.PerSecond), l.rate.Burst)
	}
	l.buckets.put(client, b, l.idle)
	return b.AllowN(l.clock.Now(), 1)
}

// clientKey is the limiter key of a remote address: its IP, or for IPv6 its /64, which one
// host usually owns whole. An address that does not parse is its own key.
func clientKey(remoteAddr string) string {
	host, _, err := net.SplitHostPort(remoteAddr)
	if err != nil {
		host = remoteAddr
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return host
	}
	ip = ip.Unmap()
	if ip.Is4() {
		return ip.String()
	}
	p, _ := ip.WithZone("").Prefix(64)
	return p.String()
}

type clientCtxKey struct{}

func withClient(ctx context.Context, client string) context.Context {
	return context.WithValue(ctx, clientCtxKey{}, client)
}

func clientFrom(ctx context.Context) string {
	c, _ := ctx.Value(clientCtxKey{}).(string)
	return c
}

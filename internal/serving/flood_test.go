// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package serving

import (
	"fmt"
	"maps"
	"net/http"
	"slices"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

// junkFlood is n distinct junk tokens of a cluster whose issuer is issuer, every kind of
// junkTokensOf in turn.
func junkFlood(issuer string, n int) []string {
	out := make([]string, 0, n)
	for i := 0; len(out) < n; i++ {
		kinds := junkTokensOf(issuer, i)
		// A token Secret's, signed, passes the local check on /metrics (PodMonitors send
		// them): it is left to the TokenReview, rate-limited like the revoked tokens below.
		delete(kinds, "legacy secret token")
		names := slices.Sorted(maps.Keys(kinds))
		for _, name := range names[:min(len(names), n-len(out))] {
			out = append(out, kinds[name])
		}
	}
	return out
}

// TestJunkTokensMakeNoReview: 2,000 junk tokens of every kind, on both routes, cause no
// TokenReview, and the legitimate user's answers, cached before the flood, still serve
// her after it with no new review. 2,000 forged tokens (the right claims and the issuer's
// key id, a signature that is not the issuer's) cause none either. Then 2,000 tokens the
// issuer did sign but the API server no longer accepts (revoked: only a review tells)
// cost the client its burst of reviews and then 429s, while the user is still served from
// the cache.
func TestJunkTokensMakeNoReview(t *testing.T) {
	tokens := &fakeTokens{valid: map[string][]string{"alice": {AgentAudience}}}
	access := &fakeAccess{paths: map[string][]string{"user-alice": {"/metrics", "/inspect/a/p"}}}
	clk := clocktesting.NewFakePassiveClock(time.Now())
	auth, err := NewAuth(AuthOptions{Tokens: tokens, Access: access, TTLs: DefaultCacheTTLs(), Policy: testPolicy, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	addr := startServer(t, Options{Auth: auth,
		Routes: AgentRoutes(http.HandlerFunc(ok), "/inspect/", http.HandlerFunc(ok), false)})
	base := "https://" + addr
	c := insecureClient()
	alice := tok("alice", AgentAudience)
	aliceIsServed := func(when string) {
		t.Helper()
		for _, path := range []string{"/metrics", "/inspect/a/p"} {
			if status, body := get(t, c, base+path, alice); status != http.StatusOK {
				t.Fatalf("%s: alice on %s: %d %q, want 200", when, path, status, body)
			}
		}
	}
	aliceIsServed("before the flood")
	access.mu.Lock()
	reviews, accessReviews := len(tokens.reviews()), len(access.asked)
	access.mu.Unlock()

	for i, junk := range junkFlood(testIssuer, 2000) {
		path := "/inspect/a/p"
		if i%2 == 1 {
			path = "/metrics"
		}
		if status, body := get(t, c, base+path, junk); status != http.StatusUnauthorized {
			t.Fatalf("junk token %d on %s: %d %q, want 401", i, path, status, body)
		}
	}
	if n := len(tokens.reviews()) - reviews; n != 0 {
		t.Errorf("2,000 junk tokens made %d TokenReviews, want none", n)
	}
	aliceIsServed("after the junk")

	for i := range 2000 {
		forged := withSignature(tok(fmt.Sprintf("forger-%d", i), AgentAudience), "AA")
		if i%2 == 1 {
			forged = signWith(otherKey(), rs256, claimsFor(fmt.Sprintf("forger-%d", i), AgentAudience))
		}
		if status, body := get(t, c, base+"/inspect/a/p", forged); status != http.StatusUnauthorized {
			t.Fatalf("forged token %d: %d %q, want 401", i, status, body)
		}
	}
	if n := len(tokens.reviews()) - reviews; n != 0 {
		t.Errorf("2,000 forged tokens made %d TokenReviews, want none", n)
	}

	limited := 0
	for i := range 2000 {
		status, body := get(t, c, base+"/inspect/a/p", tok(fmt.Sprintf("revoked-%d", i), AgentAudience))
		switch status {
		case http.StatusTooManyRequests:
			limited++
		case http.StatusUnauthorized:
		default:
			t.Fatalf("revoked token %d: %d %q, want 401 or 429", i, status, body)
		}
	}
	// The client (127.0.0.1, alice's too) has its burst less alice's first reviews left,
	// and the clock stands still.
	left := DefaultReviewRate().Burst - reviews - accessReviews
	if n := len(tokens.reviews()) - reviews; n != left || limited != 2000-left {
		t.Errorf("2,000 revoked tokens: %d TokenReviews and %d answers 429, want %d and %d", n, limited, left, 2000-left)
	}
	aliceIsServed("after the revoked tokens")
	access.mu.Lock()
	newAccessReviews := len(access.asked) - accessReviews
	access.mu.Unlock()
	if n := len(tokens.reviews()) - reviews - left; n != 0 || newAccessReviews != 0 {
		t.Errorf("alice's requests after the floods made %d TokenReviews and %d SubjectAccessReviews, want none (cached)", n, newAccessReviews)
	}
}

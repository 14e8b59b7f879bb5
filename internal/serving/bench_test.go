// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package serving

import (
	"context"
	"encoding/base64"
	"fmt"
	"testing"
	"time"
)

// BenchmarkJunkToken: what one junk token costs the agent. local-check: a token refused by
// its claims (expired). forged and forged-full-signature: a token with the right claims
// and the issuer's key id but not its signature ("AA", or 256 zero bytes, which costs an
// RSA verification), refused locally too. valid-signature: the local check of a token the
// issuer signed, which then goes on to a review. review is what a token costs that reaches
// a TokenReview, as a forged one would without the signature check: here answered by the
// in-process fake, so it is a lower bound; the integration tier's
// BenchmarkJunkTokenAPIServer asks a real API server.
func BenchmarkJunkToken(b *testing.B) {
	tokens := &fakeTokens{}
	a, err := NewAuth(AuthOptions{Tokens: tokens, Access: &fakeAccess{}, TTLs: DefaultCacheTTLs(), Policy: testPolicy,
		ReviewRate: ReviewRate{PerSecond: 1e9, Burst: 1 << 30}})
	if err != nil {
		b.Fatal(err)
	}
	benchmarkJunkToken(b, a, tokens.count, junkTokens()["expired"], tok("alice", AgentAudience),
		func(i int) string { return tok(fmt.Sprintf("forger-%d", i), AgentAudience) })
}

func (f *fakeTokens) count() int { return len(f.reviews()) }

// forgedAA is token with its signature replaced by "AA": right claims, no signature.
func forgedAA(token string) string { return withSignature(token, "AA") }

// benchmarkJunkToken times authenticate on junk and on forged tokens (distinct tokens of
// the right claims and key id, their signatures replaced), each refused locally, which
// reviews (counting the reviews made) must confirm; the local check of valid, a token the
// issuer signed; and review on the distinct tokens (so no cache answers).
func benchmarkJunkToken(b *testing.B, a *Auth, reviews func() int, junk, valid string, signed func(int) string) {
	ctx := context.Background()
	audiences := []string{AgentAudience}
	refusedLocally := func(name string, token func(int) string) {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			before, i := reviews(), 0
			for b.Loop() {
				b.StopTimer()
				t := token(i)
				i++
				b.StartTimer()
				if u, err := a.authenticate(ctx, t, audiences); u != nil || err != nil {
					b.Fatalf("forged token authenticated: %v %v", u, err)
				}
			}
			if n := reviews() - before; n != 0 {
				b.Fatalf("%d reviews of forged tokens", n)
			}
		})
	}
	refusedLocally("forged", func(i int) string { return forgedAA(signed(i)) })
	refusedLocally("forged-full-signature", func(i int) string {
		return withSignature(signed(i), base64.RawURLEncoding.EncodeToString(make([]byte, 256)))
	})
	b.Run("valid-signature", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := a.policy.check(ctx, valid, AgentAudience, time.Now()); err != nil {
				b.Fatalf("check: %v", err)
			}
		}
	})
	b.Run("local-check", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if u, err := a.authenticate(ctx, junk, audiences); u != nil || err != nil {
				b.Fatalf("junk authenticated: %v %v", u, err)
			}
		}
	})
	b.Run("review", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			b.StopTimer()
			token := signed(i)
			i++
			b.StartTimer()
			if u, err := a.review(ctx, token, AgentAudience); u != nil || err != nil {
				b.Fatalf("forged token authenticated: %v %v", u, err)
			}
		}
	})
}

package serving

import (
	"context"
	"fmt"
	"testing"
)

// BenchmarkJunkToken: what one junk token costs the agent. local-check is the path now: the
// token (expired) is refused before any review. review is the path every junk token took
// before: a TokenReview, here answered by the in-process fake, so it is a lower bound; the
// integration tier's BenchmarkJunkTokenAPIServer asks a real API server.
func BenchmarkJunkToken(b *testing.B) {
	tokens := &fakeTokens{}
	a, err := NewAuth(AuthOptions{Tokens: tokens, Access: &fakeAccess{}, TTLs: DefaultCacheTTLs(), Policy: testPolicy,
		ReviewRate: ReviewRate{PerSecond: 1e9, Burst: 1 << 30}})
	if err != nil {
		b.Fatal(err)
	}
	benchmarkJunkToken(b, a, junkTokens(0)["expired"], func(i int) string { return tok(fmt.Sprintf("forger-%d", i), AgentAudience) })
	if n := len(tokens.reviews()); n == 0 {
		b.Fatal("the review path made no review")
	}
}

// benchmarkJunkToken times authenticate on junk (refused locally) and review on distinct
// forged tokens (so no cache answers), the path of the old code.
func benchmarkJunkToken(b *testing.B, a *Auth, junk string, forged func(int) string) {
	ctx := context.Background()
	audiences := []string{AgentAudience}
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
			token := forged(i)
			i++
			b.StartTimer()
			if u, err := a.review(ctx, token, AgentAudience); u != nil || err != nil {
				b.Fatalf("forged token authenticated: %v %v", u, err)
			}
		}
	})
}

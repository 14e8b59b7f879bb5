// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package serving

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"
)

// testIssuer is the fake cluster's service account issuer.
const testIssuer = "https://issuer.test"

// testPolicy is what an agent of the fake cluster learns (apiAudience: server_test.go),
// with the fake issuer's keys (keys_test.go).
var testPolicy = TokenPolicy{Issuer: testIssuer, APIAudiences: []string{apiAudience}, Keys: testKeySet()}

// jwt encodes header and claims as a JWS compact serialization signed as the fake issuer
// signs (keys_test.go: its key for the header's alg, whose kid the header gets unless it
// names one, or none when it holds "kid": nil). An algorithm the issuer has no key for
// gets a made-up signature. The fake reviewer knows tokens by subject.
func jwt(header, claims map[string]any) string {
	h := map[string]any{}
	for k, v := range header {
		h[k] = v
	}
	key, ok := issuerKeys()[fmt.Sprint(h["alg"])]
	if kid, named := h["kid"]; !named && ok {
		h["kid"] = key.kid
	} else if named && kid == nil {
		delete(h, "kid")
	}
	signed := jwsPart(h) + "." + jwsPart(claims)
	if !ok {
		return signed + "." + base64.RawURLEncoding.EncodeToString([]byte("signature"))
	}
	return signed + "." + base64.RawURLEncoding.EncodeToString(key.sign([]byte(signed)))
}

// jwsPart is v as JSON, base64url without padding.
func jwsPart(v any) string {
	raw, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return base64.RawURLEncoding.EncodeToString(raw)
}

// withSignature is token with its signature replaced by sig (base64url).
func withSignature(token, sig string) string {
	return token[:strings.LastIndex(token, ".")+1] + sig
}

// claimsFor are the claims of a current token of testIssuer for subject and audiences.
func claimsFor(subject string, audiences ...string) map[string]any {
	return claimsOf(testIssuer, subject, audiences...)
}

// claimsOf are the claims of a current token of issuer for subject and audiences.
func claimsOf(issuer, subject string, audiences ...string) map[string]any {
	now := time.Now()
	return map[string]any{"iss": issuer, "sub": subject, "aud": audiences,
		"iat": now.Unix(), "nbf": now.Unix(), "exp": now.Add(time.Hour).Unix()}
}

// tok is a token as the fake cluster issues it: RS256, testIssuer, an hour to live.
func tok(subject string, audiences ...string) string {
	return jwt(rs256, claimsFor(subject, audiences...))
}

// with returns claims with changes applied (a nil value deletes the claim).
func with(claims map[string]any, changes map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range claims {
		out[k] = v
	}
	for k, v := range changes {
		if v == nil {
			delete(out, k)
		} else {
			out[k] = v
		}
	}
	return out
}

// subjectOf is the sub claim of token, "" if it has none or is no JWT.
func subjectOf(token string) string {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return ""
	}
	raw, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return ""
	}
	var c struct {
		Sub string `json:"sub"`
	}
	_ = json.Unmarshal(raw, &c)
	return c.Sub
}

var (
	rs256 = map[string]any{"alg": "RS256"}
	es256 = map[string]any{"alg": "ES256"}
)

// junkTokens are tokens the API server cannot accept for AgentAudience (on a route that
// takes only it), one per way the local check refuses, by name.
func junkTokens() map[string]string { return junkTokensOf(testIssuer, 0) }

// junkTokensOf are junkTokens of a cluster whose issuer is issuer. Each carries n, so the
// tokens of two calls with different n differ.
func junkTokensOf(issuer string, n int) map[string]string {
	now := time.Now()
	mallory := fmt.Sprintf("mallory-%d", n)
	good := claimsOf(issuer, mallory, AgentAudience)
	payload := base64.RawURLEncoding.EncodeToString([]byte(fmt.Sprintf(`{"aud":"numapref-agent","sub":%q}`, mallory)))
	return map[string]string{
		"garbage":               fmt.Sprintf("not-a-token-%d", n),
		"two parts":             "eyJhbGciOiJSUzI1NiJ9." + payload,
		"four parts":            jwt(rs256, good) + ".x",
		"empty signature":       withSignature(jwt(rs256, good), ""),
		"not base64url":         fmt.Sprintf("eyJhbGciOiJSUzI1NiJ9.!!%d!.c2ln", n),
		"header not JSON":       base64.RawURLEncoding.EncodeToString([]byte("RS256")) + "." + payload + ".c2ln",
		"payload a JSON string": "eyJhbGciOiJSUzI1NiJ9." + base64.RawURLEncoding.EncodeToString([]byte(strconv.Quote(mallory))) + ".c2ln",
		"alg none":              jwt(map[string]any{"alg": "none"}, good),
		"alg HS256":             jwt(map[string]any{"alg": "HS256"}, good),
		"no alg":                jwt(map[string]any{"typ": "JWT"}, good),
		"expired":               jwt(rs256, with(good, map[string]any{"exp": now.Add(-time.Hour).Unix()})),
		"no expiry":             jwt(rs256, with(good, map[string]any{"exp": nil})),
		"exp not a number":      jwt(rs256, with(good, map[string]any{"exp": "tomorrow"})),
		"not yet valid":         jwt(rs256, with(good, map[string]any{"nbf": now.Add(time.Hour).Unix()})),
		"wrong audience":        jwt(rs256, with(good, map[string]any{"aud": []string{"vault"}})),
		"audience as a string":  jwt(rs256, with(good, map[string]any{"aud": "vault"})),
		"no audience":           jwt(rs256, with(good, map[string]any{"aud": nil})),
		"another issuer":        jwt(rs256, with(good, map[string]any{"iss": "https://accounts.example.com"})),
		"legacy secret token":   jwt(rs256, with(good, map[string]any{"iss": "kubernetes/serviceaccount", "exp": nil, "aud": nil})),
		// Refused on /metrics too, where a signed one is reviewed.
		"legacy secret token, forged": withSignature(jwt(rs256, with(good, map[string]any{"iss": "kubernetes/serviceaccount", "exp": nil, "aud": nil})), "AA"),
		"the legacy issuer alone":     jwsPart(rs256) + "." + jwsPart(map[string]any{"iss": legacyIssuer}) + ".AA",
		"too large":                   jwt(rs256, with(good, map[string]any{"pad": strings.Repeat("a", maxTokenBytes)})),
		"an opaque static token":      fmt.Sprintf("31ada4fd-adec-460c-809a-%012d", n),
		"issued in the future":        jwt(rs256, with(good, map[string]any{"iat": now.Add(time.Hour).Unix()})),
		// Right claims, no valid signature: what anyone can make.
		"forged, signature AA":       withSignature(jwt(rs256, good), "AA"),
		"forged, signature of size":  withSignature(jwt(rs256, good), base64.RawURLEncoding.EncodeToString(make([]byte, 256))),
		"forged, ES256 signature":    withSignature(jwt(es256, good), base64.RawURLEncoding.EncodeToString(make([]byte, 64))),
		"forged, another key":        signWith(otherKey(), rs256, good),
		"forged, payload changed":    tamper(jwt(rs256, good)),
		"forged, key of another alg": jwt(map[string]any{"alg": "ES256", "kid": issuerKeys()["RS256"].kid}, good),
		"forged, unknown key":        jwt(map[string]any{"alg": "RS256", "kid": fmt.Sprintf("made-up-%d", n)}, good),
	}
}

// tamper changes token's payload (its subject) and keeps its signature.
func tamper(token string) string {
	parts := strings.Split(token, ".")
	raw, _ := base64.RawURLEncoding.DecodeString(parts[1])
	var claims map[string]any
	_ = json.Unmarshal(raw, &claims)
	claims["sub"] = "system:admin"
	return parts[0] + "." + jwsPart(claims) + "." + parts[2]
}

func TestTokenCheck(t *testing.T) {
	now := time.Now()
	ctx := context.Background()
	for name, token := range junkTokens() {
		t.Run("refused: "+name, func(t *testing.T) {
			if err := testPolicy.check(ctx, token, AgentAudience, now); !errors.Is(err, errJunkToken) {
				t.Errorf("check = %v, want a junk token", err)
			}
		})
	}
	// /metrics takes a token Secret's (no expiry, no audience) only when it is signed.
	legacy := with(claimsFor("prometheus"), map[string]any{"iss": legacyIssuer, "exp": nil, "aud": nil})
	for name, token := range map[string]string{
		"legacy secret token, unsigned": withSignature(jwt(rs256, legacy), "AA"),
		"the issuer alone":              jwsPart(rs256) + "." + jwsPart(map[string]any{"iss": legacyIssuer}) + ".AA",
	} {
		t.Run("refused for the API server's audiences: "+name, func(t *testing.T) {
			if err := testPolicy.check(ctx, token, APIServerAudience, now); !errors.Is(err, errJunkToken) {
				t.Errorf("check = %v, want a junk token", err)
			}
		})
	}
	// Without the issuer's keys nothing passes.
	if err := (TokenPolicy{Issuer: testIssuer}).check(ctx, tok("alice", AgentAudience), AgentAudience, now); !errors.Is(err, errJunkToken) {
		t.Errorf("a policy without keys: check = %v, want a junk token", err)
	}
	good := claimsFor("alice", AgentAudience)
	for name, tc := range map[string]struct {
		token, audience string
		policy          *TokenPolicy // nil: testPolicy
	}{
		"agent token":                  {token: tok("alice", AgentAudience), audience: AgentAudience},
		"audience as a string":         {token: jwt(rs256, with(good, map[string]any{"aud": AgentAudience})), audience: AgentAudience},
		"ES256":                        {token: jwt(es256, good), audience: AgentAudience},
		"ES384":                        {token: jwt(map[string]any{"alg": "ES384"}, good), audience: AgentAudience},
		"no key id":                    {token: jwt(map[string]any{"alg": "RS256", "kid": nil}, good), audience: AgentAudience},
		"issued within the skew":       {token: jwt(rs256, with(good, map[string]any{"iat": now.Add(clockSkew / 2).Unix()})), audience: AgentAudience},
		"expired within the skew":      {token: jwt(rs256, with(good, map[string]any{"exp": now.Add(-clockSkew / 2).Unix()})), audience: AgentAudience},
		"nbf within the skew":          {token: jwt(rs256, with(good, map[string]any{"nbf": now.Add(clockSkew / 2).Unix()})), audience: AgentAudience},
		"fractional exp":               {token: jwt(rs256, with(good, map[string]any{"exp": float64(now.Add(time.Hour).Unix()) + 0.5})), audience: AgentAudience},
		"API server token":             {token: tok("alice", apiAudience, "other"), audience: APIServerAudience},
		"issuer unknown: not checked":  {token: jwt(rs256, with(good, map[string]any{"iss": "https://elsewhere"})), audience: AgentAudience, policy: &TokenPolicy{APIAudiences: []string{apiAudience}, Keys: testKeySet()}},
		"API audiences unknown":        {token: tok("alice", "anything"), audience: APIServerAudience, policy: &TokenPolicy{Issuer: testIssuer, Keys: testKeySet()}},
		"agent audience, policy empty": {token: tok("alice", AgentAudience), audience: AgentAudience, policy: &TokenPolicy{Keys: testKeySet()}},
		// A PodMonitor sends a token Secret's: /metrics leaves it to the TokenReview.
		"legacy secret token, for the API server's": {token: jwt(rs256, with(good, map[string]any{"iss": legacyIssuer, "exp": nil, "aud": nil})), audience: APIServerAudience},
	} {
		t.Run("accepted: "+name, func(t *testing.T) {
			p := testPolicy
			if tc.policy != nil {
				p = *tc.policy
			}
			if err := p.check(ctx, tc.token, tc.audience, now); err != nil {
				t.Errorf("check = %v, want nil", err)
			}
		})
	}
	// The API server's audiences, when known, are checked for APIServerAudience.
	for _, token := range []string{tok("alice", AgentAudience), tok("alice", "vault")} {
		if err := testPolicy.check(ctx, token, APIServerAudience, now); !errors.Is(err, errJunkToken) {
			t.Errorf("a token for other audiences, for the API server's: %v, want a junk token", err)
		}
	}
}

// FuzzTokenCheck: no input panics the check, and one it passes is a JWT of three parts.
func FuzzTokenCheck(f *testing.F) {
	for _, token := range junkTokens() {
		f.Add(token)
	}
	f.Add(tok("alice", AgentAudience))
	now := time.Now()
	ctx := context.Background()
	f.Fuzz(func(t *testing.T, token string) {
		if err := testPolicy.check(ctx, token, AgentAudience, now); err == nil && strings.Count(token, ".") != 2 {
			t.Errorf("check passed %q, which is no JWT", token)
		}
	})
}

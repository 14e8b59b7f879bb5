// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package serving

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

// signingKey is a private key of the fake issuer, with its key id and algorithm.
type signingKey struct {
	kid, alg string
	key      crypto.Signer
}

// sign returns the JWS signature of signed (RFC 7518: PKCS #1 v1.5, or ECDSA r||s).
func (k signingKey) sign(signed []byte) []byte {
	switch priv := k.key.(type) {
	case *rsa.PrivateKey:
		d := sha256.Sum256(signed)
		sig, err := rsa.SignPKCS1v15(rand.Reader, priv, crypto.SHA256, d[:])
		if err != nil {
			panic(err)
		}
		return sig
	case *ecdsa.PrivateKey:
		var digest []byte
		switch k.alg {
		case "ES256":
			d := sha256.Sum256(signed)
			digest = d[:]
		case "ES384":
			d := sha512.Sum384(signed)
			digest = d[:]
		}
		r, s, err := ecdsa.Sign(rand.Reader, priv, digest)
		if err != nil {
			panic(err)
		}
		size := (priv.Curve.Params().BitSize + 7) / 8
		out := make([]byte, 2*size)
		r.FillBytes(out[:size])
		s.FillBytes(out[size:])
		return out
	}
	panic("unknown key type")
}

// jwk is the key's public half as the API server publishes it.
func (k signingKey) jwk() map[string]any {
	b64 := base64.RawURLEncoding.EncodeToString
	switch pub := k.key.Public().(type) {
	case *rsa.PublicKey:
		return map[string]any{"use": "sig", "kty": "RSA", "kid": k.kid, "alg": k.alg, "n": b64(pub.N.Bytes()), "e": b64(big.NewInt(int64(pub.E)).Bytes())}
	case *ecdsa.PublicKey:
		size := (pub.Curve.Params().BitSize + 7) / 8
		raw, err := pub.Bytes() // 0x04 ‖ X ‖ Y, each size bytes
		if err != nil {
			panic(err)
		}
		x, y := raw[1:1+size], raw[1+size:]
		return map[string]any{"use": "sig", "kty": "EC", "kid": k.kid, "alg": k.alg, "crv": pub.Curve.Params().Name, "x": b64(x), "y": b64(y)}
	}
	panic("unknown key type")
}

func newRSAKey(kid string) signingKey {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		panic(err)
	}
	return signingKey{kid: kid, alg: "RS256", key: k}
}

func newECKey(kid, alg string, curve elliptic.Curve) signingKey {
	k, err := ecdsa.GenerateKey(curve, rand.Reader)
	if err != nil {
		panic(err)
	}
	return signingKey{kid: kid, alg: alg, key: k}
}

// issuerKeys are the fake issuer's keys by algorithm, made once per test binary.
var issuerKeys = sync.OnceValue(func() map[string]signingKey {
	return map[string]signingKey{
		"RS256": newRSAKey("rsa-1"),
		"ES256": newECKey("ec-256", "ES256", elliptic.P256()),
		"ES384": newECKey("ec-384", "ES384", elliptic.P384()),
	}
})

// otherKey is a key that is not the issuer's, under the issuer's RSA key id.
var otherKey = sync.OnceValue(func() signingKey { return newRSAKey(issuerKeys()["RS256"].kid) })

// signWith makes a token of header and claims signed with k, under k's key id.
func signWith(k signingKey, header, claims map[string]any) string {
	h := map[string]any{"kid": k.kid}
	for name, v := range header {
		h[name] = v
	}
	signed := jwsPart(h) + "." + jwsPart(claims)
	return signed + "." + base64.RawURLEncoding.EncodeToString(k.sign([]byte(signed)))
}

// jwks is the key set of keys, as the API server serves it.
func jwks(keys ...signingKey) []byte {
	set := map[string][]map[string]any{"keys": {}}
	for _, k := range keys {
		set["keys"] = append(set["keys"], k.jwk())
	}
	raw, err := json.Marshal(set)
	if err != nil {
		panic(err)
	}
	return raw
}

// testKeySet is a key set of the fake issuer's keys.
func testKeySet() *KeySet {
	keys := issuerKeys()
	raw := jwks(keys["RS256"], keys["ES256"], keys["ES384"])
	return NewKeySet(func(context.Context) ([]byte, error) { return raw, nil }, nil)
}

// fakeIssuer serves a key set that a test changes, and counts the fetches.
type fakeIssuer struct {
	mu      sync.Mutex
	keys    []signingKey
	failing error
	fetches atomic.Int64
}

func (f *fakeIssuer) fetch(context.Context) ([]byte, error) {
	f.fetches.Add(1)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failing != nil {
		return nil, f.failing
	}
	return jwks(f.keys...), nil
}

func (f *fakeIssuer) set(keys []signingKey, failing error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.keys, f.failing = keys, failing
}

// verifyToken checks token's signature with s, as TokenPolicy.check does last.
func verifyToken(s *KeySet, token string) error {
	t, err := parseToken(token)
	if err != nil {
		return err
	}
	return s.verify(context.Background(), t.alg, t.kid, t.signed, t.sig)
}

func TestKeySetVerifies(t *testing.T) {
	keys := issuerKeys()
	s := testKeySet()
	claims := claimsFor("alice", AgentAudience)
	for name, tc := range map[string]struct {
		token string
		ok    bool
	}{
		"RS256":                         {token: signWith(keys["RS256"], rs256, claims), ok: true},
		"ES256":                         {token: signWith(keys["ES256"], es256, claims), ok: true},
		"ES384":                         {token: signWith(keys["ES384"], map[string]any{"alg": "ES384"}, claims), ok: true},
		"no key id":                     {token: jwt(map[string]any{"alg": "ES256", "kid": nil}, claims), ok: true},
		"signature AA":                  {token: withSignature(signWith(keys["RS256"], rs256, claims), "AA")},
		"RS256 signature of zeros":      {token: withSignature(signWith(keys["RS256"], rs256, claims), base64.RawURLEncoding.EncodeToString(make([]byte, 256)))},
		"ES256 signature of zeros":      {token: withSignature(signWith(keys["ES256"], es256, claims), base64.RawURLEncoding.EncodeToString(make([]byte, 64)))},
		"ES256 signature one byte long": {token: withSignature(signWith(keys["ES256"], es256, claims), "AA")},
		"another key under the kid":     {token: signWith(otherKey(), rs256, claims)},
		"another key, no kid":           {token: signWith(otherKey(), map[string]any{"alg": "RS256", "kid": nil}, claims)},
		"payload changed":               {token: tamper(signWith(keys["RS256"], rs256, claims))},
		"the RSA key named for ES256":   {token: signWith(signingKey{kid: "rsa-1", alg: "ES256", key: keys["ES256"].key}, es256, claims)},
		"the P-256 key named for ES384": {token: signWith(signingKey{kid: "ec-256", alg: "ES384", key: keys["ES384"].key}, map[string]any{"alg": "ES384"}, claims)},
	} {
		t.Run(name, func(t *testing.T) {
			err := verifyToken(s, tc.token)
			if tc.ok && err != nil || !tc.ok && !errors.Is(err, errJunkToken) {
				t.Errorf("verify = %v, want ok %v (or a junk token)", err, tc.ok)
			}
		})
	}
}

// A token naming a key the set lacks makes it fetch the keys again, at most once per
// keyRefreshInterval however many such tokens come: a rotated key is found, a flood of
// made-up key ids costs the API server one GET per interval.
func TestKeySetRefreshesOnAnUnknownKey(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Now())
	old, rotated := newRSAKey("old"), newRSAKey("rotated")
	issuer := &fakeIssuer{keys: []signingKey{old}}
	s := NewKeySet(issuer.fetch, clk)
	claims := claimsFor("alice", AgentAudience)
	if err := verifyToken(s, signWith(old, rs256, claims)); err != nil || issuer.fetches.Load() != 1 {
		t.Fatalf("first token: %v after %d fetches, want verified after 1", err, issuer.fetches.Load())
	}

	// 10,000 made-up key ids, an interval later: one fetch (for the first), then refused
	// with none.
	clk.SetTime(clk.Now().Add(keyRefreshInterval))
	for i := range 10000 {
		token := jwsPart(map[string]any{"alg": "RS256", "kid": fmt.Sprintf("made-up-%d", i)}) + "." + jwsPart(claims) + ".AA"
		if err := verifyToken(s, token); !errors.Is(err, errJunkToken) {
			t.Fatalf("made-up key %d: %v, want a junk token", i, err)
		}
	}
	if n := issuer.fetches.Load(); n != 2 {
		t.Errorf("10,000 made-up key ids made %d fetches in all, want 2", n)
	}

	// The issuer rotates its key; a token of the new key within the interval of the last
	// fetch is refused, one after it is verified.
	issuer.set([]signingKey{old, rotated}, nil)
	if err := verifyToken(s, signWith(rotated, rs256, claims)); !errors.Is(err, errJunkToken) {
		t.Errorf("the rotated key within the interval: %v, want a junk token", err)
	}
	clk.SetTime(clk.Now().Add(keyRefreshInterval))
	if err := verifyToken(s, signWith(rotated, rs256, claims)); err != nil {
		t.Errorf("the rotated key after the interval: %v", err)
	}
	if n := issuer.fetches.Load(); n != 3 {
		t.Errorf("%d fetches in all, want 3", n)
	}
	if err := verifyToken(s, signWith(old, rs256, claims)); err != nil {
		t.Errorf("the old key, still published: %v", err)
	}
}

// Keys older than keyMaxAge are fetched again: a key the issuer dropped is dropped. A
// fetch that fails keeps the keys there were.
func TestKeySetAgesAndKeepsItsKeys(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Now())
	old, current := newRSAKey("old"), newECKey("current", "ES256", elliptic.P256())
	issuer := &fakeIssuer{keys: []signingKey{old, current}}
	s := NewKeySet(issuer.fetch, clk)
	claims := claimsFor("alice", AgentAudience)
	if err := s.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	issuer.set(nil, errors.New("connection refused"))
	clk.SetTime(clk.Now().Add(keyMaxAge))
	if err := verifyToken(s, signWith(old, rs256, claims)); err != nil {
		t.Errorf("the API server unreachable: %v, want the keys kept", err)
	}
	issuer.set([]signingKey{current}, nil)
	clk.SetTime(clk.Now().Add(keyRefreshInterval))
	if err := verifyToken(s, signWith(old, rs256, claims)); !errors.Is(err, errJunkToken) {
		t.Errorf("a dropped key: %v, want a junk token", err)
	}
	if err := verifyToken(s, signWith(current, es256, claims)); err != nil {
		t.Errorf("the current key: %v", err)
	}
}

// Before any fetch succeeded nothing can be verified: that is no junk token (the server
// answers 503, as when a review fails), and the next try waits for the interval.
func TestKeySetUnavailable(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Now())
	key := newRSAKey("k")
	issuer := &fakeIssuer{failing: errors.New("forbidden")}
	s := NewKeySet(issuer.fetch, clk)
	token := signWith(key, rs256, claimsFor("alice", AgentAudience))
	for range 100 {
		if err := verifyToken(s, token); !errors.Is(err, errKeysUnavailable) || errors.Is(err, errJunkToken) {
			t.Fatalf("verify = %v, want the keys unavailable", err)
		}
	}
	if n := issuer.fetches.Load(); n != 1 {
		t.Errorf("%d fetches, want 1", n)
	}
	issuer.set([]signingKey{key}, nil)
	clk.SetTime(clk.Now().Add(keyRefreshInterval))
	if err := verifyToken(s, token); err != nil {
		t.Errorf("once the keys are served: %v", err)
	}
}

// Concurrent tokens of an unknown key while a fetch is slow make that one fetch.
func TestKeySetFetchesOnceAtATime(t *testing.T) {
	key := newRSAKey("k")
	started, release := make(chan struct{}), make(chan struct{})
	var fetches atomic.Int64
	s := NewKeySet(func(context.Context) ([]byte, error) {
		if fetches.Add(1) == 1 {
			close(started)
		}
		<-release
		return jwks(key), nil
	}, clocktesting.NewFakePassiveClock(time.Now()))
	token := signWith(key, rs256, claimsFor("alice", AgentAudience))
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() { _ = verifyToken(s, token) })
	}
	// The others find the fetch under way and answer without it; then it ends.
	<-started
	close(release)
	wg.Wait()
	if n := fetches.Load(); n != 1 {
		t.Errorf("%d fetches, want 1", n)
	}
	if err := verifyToken(s, token); err != nil {
		t.Errorf("after the fetch: %v", err)
	}
}

func TestParseJWKS(t *testing.T) {
	keys := issuerKeys()
	good := keys["RS256"].jwk()
	for name, tc := range map[string]struct {
		set     []map[string]any
		want    int // keys kept
		wantErr bool
	}{
		"RSA and EC":           {set: []map[string]any{good, keys["ES256"].jwk()}, want: 2},
		"an encryption key":    {set: []map[string]any{good, with(keys["ES256"].jwk(), map[string]any{"use": "enc"})}, want: 1},
		"an unknown key type":  {set: []map[string]any{good, {"kty": "OKP", "crv": "Ed25519", "x": "AA"}}, want: 1},
		"a point off curve":    {set: []map[string]any{good, with(keys["ES256"].jwk(), map[string]any{"y": base64.RawURLEncoding.EncodeToString(make([]byte, 32))})}, want: 1},
		"an even exponent":     {set: []map[string]any{with(good, map[string]any{"e": "Ag"})}, wantErr: true},
		"no key":               {set: []map[string]any{}, wantErr: true},
		"too many keys":        {set: repeatKey(good, maxKeys+1), wantErr: true},
		"short EC coordinates": {set: []map[string]any{with(keys["ES256"].jwk(), map[string]any{"x": "AA"})}, wantErr: true},
	} {
		t.Run(name, func(t *testing.T) {
			raw, err := json.Marshal(map[string]any{"keys": tc.set})
			if err != nil {
				t.Fatal(err)
			}
			byID, anon, err := parseJWKS(raw)
			if (err != nil) != tc.wantErr {
				t.Fatalf("parseJWKS: %v, want an error %v", err, tc.wantErr)
			}
			if got := len(byID) + len(anon); !tc.wantErr && got != tc.want {
				t.Errorf("%d keys, want %d", got, tc.want)
			}
		})
	}
	if _, _, err := parseJWKS([]byte("<html>")); err == nil {
		t.Error("a page that is no JSON parsed")
	}
}

func repeatKey(k map[string]any, n int) []map[string]any {
	out := make([]map[string]any, n)
	for i := range out {
		out[i] = with(k, map[string]any{"kid": fmt.Sprint(i)})
	}
	return out
}

// While the issuer's keys cannot be read no token is accepted, and none is reviewed: the
// server answers 503, as when a review fails, and 401 again for junk.
func TestServerWithoutTheIssuersKeys(t *testing.T) {
	tokens := &fakeTokens{valid: map[string][]string{"alice": {AgentAudience}}}
	access := &fakeAccess{paths: map[string][]string{"user-alice": {"/metrics"}}}
	issuer := &fakeIssuer{failing: errors.New("forbidden")}
	policy := testPolicy
	policy.Keys = NewKeySet(issuer.fetch, nil)
	auth, err := NewAuth(AuthOptions{Tokens: tokens, Access: access, TTLs: DefaultCacheTTLs(), Policy: policy})
	if err != nil {
		t.Fatal(err)
	}
	addr := startServer(t, Options{Auth: auth, Routes: AgentRoutes(http.HandlerFunc(ok), "/inspect/", http.HandlerFunc(ok), false)})
	c := insecureClient()
	if status, body := get(t, c, "https://"+addr+"/metrics", tok("alice", AgentAudience)); status != http.StatusServiceUnavailable {
		t.Errorf("a signed token without the keys: %d %q, want 503", status, body)
	}
	if status, body := get(t, c, "https://"+addr+"/metrics", junkTokens()["expired"]); status != http.StatusUnauthorized {
		t.Errorf("an expired token without the keys: %d %q, want 401", status, body)
	}
	if n := len(tokens.reviews()); n != 0 {
		t.Errorf("%d TokenReviews, want none", n)
	}
}

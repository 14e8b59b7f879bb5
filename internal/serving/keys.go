// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package serving

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"sync"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
)

// jwksPath is where the API server publishes the public keys of its service account
// issuer (a JSON Web Key Set). The discovery document's jwks_uri may name another host
// (--service-account-jwks-uri); the API server serves the same keys here all the same, and
// the agent talks to the API server only.
const jwksPath = "/openid/v1/jwks"

// Bounds of the key set: a refresh at most every keyRefreshInterval, however many tokens
// name a key the set lacks (so a flood of made-up key ids costs the API server one GET per
// interval and agent), and a fetch again once the keys are keyMaxAge old, so a key the
// issuer dropped is dropped here too.
const (
	keyRefreshInterval = 30 * time.Second
	keyMaxAge          = time.Hour
	keyFetchTimeout    = 10 * time.Second
	// maxKeys bounds the keys kept; maxKeylessTries the keys tried for a token that names
	// none (kube-apiserver names one in every token it signs).
	maxKeys         = 64
	maxKeylessTries = 4
)

// errKeysUnavailable: the issuer's keys could not be fetched, so no token can be verified.
var errKeysUnavailable = errors.New("the service account issuer's public keys are unavailable")

// KeySet is the service account issuer's public keys, fetched from the API server and
// refreshed: when a token names a key the set lacks (at most every keyRefreshInterval),
// and when the keys are older than keyMaxAge. A fetch that fails keeps the keys it had.
type KeySet struct {
	fetch func(ctx context.Context) ([]byte, error)
	clock clock.PassiveClock

	fetching sync.Mutex // one fetch at a time; the others use the keys there are
	mu       sync.Mutex
	keys     map[string]jwk // by key id
	anon     []jwk          // keys without an id
	fetched  time.Time      // the last successful fetch
	tried    time.Time      // the last attempt
	lastErr  error          // of the last attempt
}

// jwk is a public key of the set.
type jwk struct {
	alg string // the algorithm it signs with; "" when the set says none
	key crypto.PublicKey
}

// NewKeySet makes a key set that fetches the keys with fetch (APIServerKeys), on the
// clock clk (nil: the real one). Nothing is fetched before the first verification or
// Refresh.
func NewKeySet(fetch func(ctx context.Context) ([]byte, error), clk clock.PassiveClock) *KeySet {
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &KeySet{fetch: fetch, clock: clk}
}

// APIServerKeys fetches the issuer's key set from the API server with the agent's client
// (GET /openid/v1/jwks, which every service account may read, as the discovery document).
func APIServerKeys(discovery rest.Interface) func(ctx context.Context) ([]byte, error) {
	return func(ctx context.Context) ([]byte, error) {
		raw, err := discovery.Get().AbsPath(jwksPath).DoRaw(ctx)
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", jwksPath, err)
		}
		return raw, nil
	}
}

// Refresh fetches the keys now, unless another fetch is under way or one was made less
// than keyRefreshInterval ago; it returns the error of the last fetch made.
func (s *KeySet) Refresh(ctx context.Context) error {
	s.refresh(ctx)
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lastErr
}

// refresh fetches the keys if it may (see Refresh).
func (s *KeySet) refresh(ctx context.Context) {
	if !s.fetching.TryLock() {
		return
	}
	defer s.fetching.Unlock()
	now := s.clock.Now()
	s.mu.Lock()
	due := s.tried.IsZero() || now.Sub(s.tried) >= keyRefreshInterval
	if due {
		s.tried = now
	}
	s.mu.Unlock()
	if !due {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, keyFetchTimeout)
	defer cancel()
	raw, err := s.fetch(ctx)
	var keys map[string]jwk
	var anon []jwk
	if err == nil {
		keys, anon, err = parseJWKS(raw)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lastErr = err
	if err == nil {
		s.keys, s.anon, s.fetched = keys, anon, now
	}
}

// verify checks sig over signed, a JWS signing input, for alg with the key kid names (or,
// without a kid, with each key that signs with alg). It refreshes the set first when kid
// is not in it or the set is old. An error wraps errJunkToken when the signature is not
// one of the issuer's keys, errKeysUnavailable when there are no keys to tell.
func (s *KeySet) verify(ctx context.Context, alg, kid string, signed, sig []byte) error {
	candidates, known, stale := s.lookup(alg, kid)
	if !known || stale {
		s.refresh(ctx)
		candidates, known, _ = s.lookup(alg, kid)
	}
	if !known {
		s.mu.Lock()
		never, lastErr := s.fetched.IsZero(), s.lastErr
		s.mu.Unlock()
		if never && lastErr != nil {
			return fmt.Errorf("%w: %w", errKeysUnavailable, lastErr)
		}
		if never {
			return fmt.Errorf("%w: not fetched yet", errKeysUnavailable)
		}
		return fmt.Errorf("%w: signed with key %q, which the issuer does not publish", errJunkToken, kid)
	}
	for _, k := range candidates {
		if verifySignature(alg, k.key, signed, sig) {
			return nil
		}
	}
	return fmt.Errorf("%w: the signature is not the issuer's (%s, key %q)", errJunkToken, alg, kid)
}

// lookup returns the keys that may have signed a token of alg and kid; known is false
// when the set holds no key of that id (or, without an id, none for alg), stale when the
// set is due to be fetched again.
func (s *KeySet) lookup(alg, kid string) (candidates []jwk, known, stale bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	stale = s.fetched.IsZero() || s.clock.Since(s.fetched) >= keyMaxAge
	if kid != "" {
		k, ok := s.keys[kid]
		if !ok {
			return nil, false, stale
		}
		if !k.signs(alg) {
			return nil, true, stale // the issuer's key, of another algorithm: no signature of it
		}
		return []jwk{k}, true, stale
	}
	for _, k := range append(s.withIDs(), s.anon...) {
		if k.signs(alg) && len(candidates) < maxKeylessTries {
			candidates = append(candidates, k)
		}
	}
	return candidates, len(candidates) > 0, stale
}

// withIDs are the keys with an id, any of which may have signed a token that names none.
func (s *KeySet) withIDs() []jwk {
	out := make([]jwk, 0, len(s.keys))
	for _, k := range s.keys {
		out = append(out, k)
	}
	return out
}

// signs reports whether k can verify a signature of alg.
func (k jwk) signs(alg string) bool {
	if k.alg != "" && k.alg != alg {
		return false
	}
	switch pub := k.key.(type) {
	case *rsa.PublicKey:
		return alg == "RS256"
	case *ecdsa.PublicKey:
		return alg == curveAlg[pub.Curve]
	}
	return false
}

// curveAlg is the algorithm of each curve (RFC 7518, 3.4).
var curveAlg = map[elliptic.Curve]string{elliptic.P256(): "ES256", elliptic.P384(): "ES384", elliptic.P521(): "ES512"}

// verifySignature checks a JWS signature (RFC 7515, RFC 7518 3.3 and 3.4) with the
// standard library: RSASSA-PKCS1-v1_5 with SHA-256, or ECDSA with r||s of the curve's size.
func verifySignature(alg string, key crypto.PublicKey, signed, sig []byte) bool {
	switch pub := key.(type) {
	case *rsa.PublicKey:
		// A signature of another length is no signature of this key; crypto/rsa would
		// tell too, but only after preparing the key for the arithmetic.
		if alg != "RS256" || len(sig) != pub.Size() {
			return false
		}
		digest := sha256.Sum256(signed)
		return rsa.VerifyPKCS1v15(pub, crypto.SHA256, digest[:], sig) == nil
	case *ecdsa.PublicKey:
		size := (pub.Curve.Params().BitSize + 7) / 8
		if len(sig) != 2*size {
			return false
		}
		var digest []byte
		switch alg {
		case "ES256":
			d := sha256.Sum256(signed)
			digest = d[:]
		case "ES384":
			d := sha512.Sum384(signed)
			digest = d[:]
		case "ES512":
			d := sha512.Sum512(signed)
			digest = d[:]
		default:
			return false
		}
		r, s := new(big.Int).SetBytes(sig[:size]), new(big.Int).SetBytes(sig[size:])
		return ecdsa.Verify(pub, digest, r, s)
	}
	return false
}

// parseJWKS reads a JSON Web Key Set (RFC 7517): the RSA and EC signing keys it holds, by
// key id, and those without one. Keys of other types or uses, and keys that do not parse,
// are skipped; a set with no key left is an error.
func parseJWKS(raw []byte) (map[string]jwk, []jwk, error) {
	var set struct {
		Keys []struct {
			Kty string `json:"kty"`
			Use string `json:"use"`
			Kid string `json:"kid"`
			Alg string `json:"alg"`
			N   string `json:"n"`
			E   string `json:"e"`
			Crv string `json:"crv"`
			X   string `json:"x"`
			Y   string `json:"y"`
		} `json:"keys"`
	}
	if err := json.Unmarshal(raw, &set); err != nil {
		return nil, nil, fmt.Errorf("decoding %s: %w", jwksPath, err)
	}
	if len(set.Keys) > maxKeys {
		return nil, nil, fmt.Errorf("%s holds %d keys, more than %d", jwksPath, len(set.Keys), maxKeys)
	}
	keys, anon := map[string]jwk{}, []jwk(nil)
	var skipped []error
	for i, k := range set.Keys {
		if k.Use != "" && k.Use != "sig" {
			continue
		}
		var pub crypto.PublicKey
		var err error
		switch k.Kty {
		case "RSA":
			pub, err = rsaKey(k.N, k.E)
		case "EC":
			pub, err = ecKey(k.Crv, k.X, k.Y)
		default:
			continue
		}
		if err != nil {
			skipped = append(skipped, fmt.Errorf("key %d (%q): %w", i, k.Kid, err))
			continue
		}
		if k.Kid == "" {
			anon = append(anon, jwk{alg: k.Alg, key: pub})
		} else {
			keys[k.Kid] = jwk{alg: k.Alg, key: pub}
		}
	}
	if len(keys)+len(anon) == 0 {
		return nil, nil, fmt.Errorf("%s holds no RSA or EC signing key that parses: %w", jwksPath, errors.Join(skipped...))
	}
	return keys, anon, nil
}

func rsaKey(n, e string) (*rsa.PublicKey, error) {
	nb, err := base64.RawURLEncoding.DecodeString(n)
	if err != nil {
		return nil, fmt.Errorf("modulus: %w", err)
	}
	eb, err := base64.RawURLEncoding.DecodeString(e)
	if err != nil {
		return nil, fmt.Errorf("exponent: %w", err)
	}
	exp := new(big.Int).SetBytes(eb)
	if !exp.IsInt64() || exp.Int64() < 3 || exp.Int64() > 1<<31-1 || exp.Bit(0) == 0 {
		return nil, errors.New("exponent out of range")
	}
	mod := new(big.Int).SetBytes(nb)
	if mod.Sign() == 0 {
		return nil, errors.New("no modulus")
	}
	return &rsa.PublicKey{N: mod, E: int(exp.Int64())}, nil
}

func ecKey(crv, x, y string) (*ecdsa.PublicKey, error) {
	var curve elliptic.Curve
	switch crv {
	case "P-256":
		curve = elliptic.P256()
	case "P-384":
		curve = elliptic.P384()
	case "P-521":
		curve = elliptic.P521()
	default:
		return nil, fmt.Errorf("curve %q", crv)
	}
	size := (curve.Params().BitSize + 7) / 8
	xb, errX := base64.RawURLEncoding.DecodeString(x)
	yb, errY := base64.RawURLEncoding.DecodeString(y)
	if err := errors.Join(errX, errY); err != nil {
		return nil, fmt.Errorf("coordinates: %w", err)
	}
	if len(xb) != size || len(yb) != size {
		return nil, fmt.Errorf("coordinates of %d and %d bytes, not %d", len(xb), len(yb), size)
	}
	point := append(append([]byte{4}, xb...), yb...)
	return ecdsa.ParseUncompressedPublicKey(curve, point)
}

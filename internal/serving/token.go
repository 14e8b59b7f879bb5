// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package serving

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// The local check of a bearer token, made before any TokenReview: a JWT of the cluster's
// service account issuer, current, for the route's audience, and signed with one of the
// issuer's public keys (KeySet). A token that fails it cannot be one the API server
// accepts for the route, so no review is spent on it; one that passes is still reviewed
// (TokenReview), which tells a revoked token or a deleted pod's.

// maxTokenBytes bounds the token the check decodes. A service account token is 1-2 KB;
// the request header bound (Limits.MaxHeaderBytes) already caps it at 32 KiB.
const maxTokenBytes = 16 << 10

// clockSkew is the leeway on exp, nbf and iat: the agent's and the API server's clocks may
// differ by this much, and the API server decides the edge cases.
const clockSkew = time.Minute

// signingAlgs are the algorithms kube-apiserver signs service account tokens with: RS256
// for an RSA key, ES256/ES384/ES512 for an ECDSA key by its curve.
var signingAlgs = []string{"RS256", "ES256", "ES384", "ES512"}

// TokenPolicy is what the agent knows of the tokens the API server issues. An empty field
// is unknown, and only its check is skipped.
type TokenPolicy struct {
	// Issuer is the cluster's service account issuer (the iss of every token it issues).
	Issuer string
	// APIAudiences are the API server's own audiences (the aud of a token requested
	// without audiences), which a token must carry for APIServerAudience.
	APIAudiences []string
	// Keys are the issuer's public keys, which every token's signature is checked
	// against. Without them every token is refused.
	Keys *KeySet
}

// legacyIssuer is the iss of the service account token Secrets kube-controller-manager
// fills (kubernetes.io/service-account-token): they carry no exp and no aud.
const legacyIssuer = "kubernetes/serviceaccount"

// errJunkToken marks a token that failed the local check.
var errJunkToken = errors.New("not a token the API server accepts here")

// tokenClaims are the registered claims the check reads.
type tokenClaims struct {
	Issuer    string        `json:"iss"`
	Audience  audienceClaim `json:"aud"`
	Expiry    *float64      `json:"exp"`
	NotBefore *float64      `json:"nbf"`
	IssuedAt  *float64      `json:"iat"`
}

// parsedToken is a JWS compact serialization taken apart.
type parsedToken struct {
	alg, kid string
	signed   []byte // header.payload, what the signature is over
	sig      []byte
	claims   tokenClaims
}

// audienceClaim is aud: one string or a list of them (RFC 7519, 4.1.3).
type audienceClaim []string

func (a *audienceClaim) UnmarshalJSON(b []byte) error {
	if bytes.HasPrefix(bytes.TrimSpace(b), []byte(`"`)) {
		var one string
		if err := json.Unmarshal(b, &one); err != nil {
			return err
		}
		*a = audienceClaim{one}
		return nil
	}
	var many []string
	if err := json.Unmarshal(b, &many); err != nil {
		return err
	}
	*a = many
	return nil
}

// check says why token cannot be accepted for audience at now, or nil when it may be. An
// error wraps errJunkToken when the token is refused, errKeysUnavailable when the
// signature could not be checked for want of the issuer's keys.
func (p TokenPolicy) check(ctx context.Context, token, audience string, now time.Time) error {
	t, err := parseToken(token)
	if err != nil {
		return err
	}
	if err := p.checkClaims(&t.claims, audience, now); err != nil {
		return err
	}
	// The signature last: it costs the most, and a refresh of the keys is spent only on
	// a token whose claims would pass.
	if p.Keys == nil {
		return fmt.Errorf("%w: no keys to verify its signature", errJunkToken)
	}
	return p.Keys.verify(ctx, t.alg, t.kid, t.signed, t.sig)
}

// checkClaims says why claims cannot be accepted for audience at now.
func (p TokenPolicy) checkClaims(c *tokenClaims, audience string, now time.Time) error {
	if c.Expiry == nil && c.Issuer == legacyIssuer && audience == APIServerAudience {
		// A service account token Secret's: no expiry, no audience, signed with the same
		// keys. Prometheus Operator's PodMonitor can only send a token from a Secret (the
		// chart's default scraper), so /metrics takes these once their signature is checked.
		return nil
	}
	if c.Expiry == nil {
		return fmt.Errorf("%w: no expiry (exp)", errJunkToken)
	}
	if !now.Before(unixTime(*c.Expiry).Add(clockSkew)) {
		return fmt.Errorf("%w: expired at %s", errJunkToken, unixTime(*c.Expiry).UTC().Format(time.RFC3339))
	}
	if c.NotBefore != nil && now.Add(clockSkew).Before(unixTime(*c.NotBefore)) {
		return fmt.Errorf("%w: not valid before %s", errJunkToken, unixTime(*c.NotBefore).UTC().Format(time.RFC3339))
	}
	if c.IssuedAt != nil && now.Add(clockSkew).Before(unixTime(*c.IssuedAt)) {
		return fmt.Errorf("%w: issued in the future, at %s", errJunkToken, unixTime(*c.IssuedAt).UTC().Format(time.RFC3339))
	}
	if p.Issuer != "" && c.Issuer != p.Issuer {
		return fmt.Errorf("%w: issuer %q is not the cluster's", errJunkToken, c.Issuer)
	}
	want := []string{audience}
	if audience == APIServerAudience {
		want = p.APIAudiences // unknown: not checked
	}
	if len(want) > 0 && !slices.ContainsFunc(c.Audience, func(a string) bool { return slices.Contains(want, a) }) {
		return fmt.Errorf("%w: audiences %q lack %q", errJunkToken, []string(c.Audience), want)
	}
	return nil
}

// parseToken decodes a JWS compact serialization (header.payload.signature, each
// base64url without padding) whose header names a signing algorithm of the API server.
// Nothing is verified yet.
func parseToken(token string) (*parsedToken, error) {
	if len(token) > maxTokenBytes {
		return nil, fmt.Errorf("%w: %d bytes", errJunkToken, len(token))
	}
	header, rest, ok := strings.Cut(token, ".")
	payload, sig, ok2 := strings.Cut(rest, ".")
	if !ok || !ok2 || strings.Contains(sig, ".") || header == "" || payload == "" || sig == "" {
		return nil, fmt.Errorf("%w: not a JWT (three dot-separated parts)", errJunkToken)
	}
	var h struct {
		Alg string `json:"alg"`
		Kid string `json:"kid"`
	}
	if err := decodePart(header, &h); err != nil {
		return nil, fmt.Errorf("%w: header: %w", errJunkToken, err)
	}
	if !slices.Contains(signingAlgs, h.Alg) {
		return nil, fmt.Errorf("%w: algorithm %q", errJunkToken, h.Alg)
	}
	t := &parsedToken{alg: h.Alg, kid: h.Kid, signed: []byte(token[:len(header)+1+len(payload)])}
	var err error
	if t.sig, err = base64.RawURLEncoding.DecodeString(sig); err != nil {
		return nil, fmt.Errorf("%w: signature: %w", errJunkToken, err)
	}
	if err := decodePart(payload, &t.claims); err != nil {
		return nil, fmt.Errorf("%w: payload: %w", errJunkToken, err)
	}
	return t, nil
}

// decodePart decodes one base64url part holding a JSON object into v.
func decodePart(part string, v any) error {
	raw, err := base64.RawURLEncoding.DecodeString(part)
	if err != nil {
		return err
	}
	if !bytes.HasPrefix(bytes.TrimSpace(raw), []byte("{")) {
		return errors.New("not a JSON object")
	}
	return json.Unmarshal(raw, v)
}

// unixTime is a NumericDate (seconds since the epoch, possibly fractional), clamped to
// what time.Time holds.
func unixTime(sec float64) time.Time {
	switch {
	case math.IsNaN(sec) || sec < -1e12:
		return time.Unix(-1e12, 0)
	case sec > 1e12:
		return time.Unix(1e12, 0)
	}
	whole, frac := math.Modf(sec)
	return time.Unix(int64(whole), int64(frac*1e9))
}

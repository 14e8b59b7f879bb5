// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package serving

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"k8s.io/client-go/rest"
)

// discoveryPath is the API server's OpenID discovery document; its issuer is the cluster's
// service account issuer.
const discoveryPath = "/.well-known/openid-configuration"

// LearnTokenPolicy learns, once at start, what the local token check compares against:
//
//   - From the agent's own credential (cfg's bearer token, in a pod kubelet's projected
//     service account token): a token requested without audiences is issued by the
//     cluster's issuer for the API server's own audiences, so its iss and aud are both.
//   - Failing that, the issuer from the API server's discovery document (GET
//     /.well-known/openid-configuration, which every service account may read), and the
//     API server's audiences stay unknown.
//
// skipped names what could not be learned, with why: those checks are not made, and the
// others are.
//
// The signature is always checked, against the issuer's public keys as the API server
// publishes them (APIServerKeys, through discovery), fetched now and refreshed as tokens
// need (KeySet). Until they have been fetched every token is refused.
func LearnTokenPolicy(ctx context.Context, cfg *rest.Config, discovery rest.Interface) (p TokenPolicy, skipped []string) {
	p.Keys = NewKeySet(APIServerKeys(discovery), nil)
	if err := p.Keys.Refresh(ctx); err != nil {
		skipped = append(skipped, "the issuer's public keys, read again when a token needs them (until then every token is refused): "+err.Error())
	}
	if c, err := ownTokenClaims(cfg); err == nil && c.Issuer != "" && len(c.Audience) > 0 {
		p.Issuer, p.APIAudiences = c.Issuer, c.Audience
		return p, skipped
	}
	skipped = append(skipped, "the API server's audiences: the agent's credential is no service account token")
	issuer, err := discoverIssuer(ctx, discovery)
	if err != nil {
		return p, append(skipped, "the issuer: "+err.Error())
	}
	p.Issuer = issuer
	return p, skipped
}

// ownTokenClaims are the claims of cfg's bearer token, read from its file when it has one.
func ownTokenClaims(cfg *rest.Config) (*tokenClaims, error) {
	token := cfg.BearerToken
	if cfg.BearerTokenFile != "" {
		raw, err := os.ReadFile(cfg.BearerTokenFile)
		if err != nil {
			return nil, fmt.Errorf("reading the agent's token: %w", err)
		}
		token = strings.TrimSpace(string(raw))
	}
	t, err := parseToken(token)
	if err != nil {
		return nil, err
	}
	return &t.claims, nil
}

// discoverIssuer reads the issuer of the API server's discovery document.
func discoverIssuer(ctx context.Context, discovery rest.Interface) (string, error) {
	raw, err := discovery.Get().AbsPath(discoveryPath).DoRaw(ctx)
	if err != nil {
		return "", fmt.Errorf("reading %s: %w", discoveryPath, err)
	}
	var doc struct {
		Issuer string `json:"issuer"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		return "", fmt.Errorf("decoding %s: %w", discoveryPath, err)
	}
	if doc.Issuer == "" {
		return "", fmt.Errorf("%s names no issuer", discoveryPath)
	}
	return doc.Issuer, nil
}

// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"strings"
	"testing"
	"time"
)

// TestSignerFlagsRefused: flag sets the signer cannot run with are refused, naming why.
func TestSignerFlagsRefused(t *testing.T) {
	ok := signerFlags{namespace: "ns", caSecret: "ca", agentSA: "agent", scraperSecret: "s", scraperSA: "scraper", scraperLifetime: time.Hour}
	if err := ok.check(); err != nil {
		t.Fatalf("valid flags refused: %v", err)
	}
	for name, tc := range map[string]struct {
		mod  func(*signerFlags)
		want string
	}{
		"no namespace":          {func(f *signerFlags) { f.namespace = "" }, "-namespace"},
		"CA without the agents": {func(f *signerFlags) { f.agentSA = "" }, "-agent-service-account"},
		"two CAs":               {func(f *signerFlags) { f.publishFrom = "tls" }, "exclude each other"},
		"scraper half named":    {func(f *signerFlags) { f.scraperSA = "" }, "go together"},
		"token too short":       {func(f *signerFlags) { f.scraperLifetime = time.Minute }, "10m"},
	} {
		f := ok
		tc.mod(&f)
		if err := f.check(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error naming %q", name, err, tc.want)
		}
	}
}

// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package localnode

import (
	"testing"
)

func TestUnescapeMount(t *testing.T) {
	for in, want := range map[string]string{
		`/run/netns/cni-1`:       "/run/netns/cni-1",
		`/var/tmp/a\040b`:        "/var/tmp/a b",
		`/x\134y`:                `/x\y`,
		`/bad\08`:                `/bad\08`,
		`/short\04`:              `/short\04`,
		`/tab\011and\012newline`: "/tab\tand\nnewline",
	} {
		if got := unescapeMount(in); got != want {
			t.Errorf("unescapeMount(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestUnder(t *testing.T) {
	prefixes := []string{"/run/containerd", "/var/tmp/node"}
	for path, want := range map[string]bool{
		"/run/containerd":           true,
		"/run/containerd/s/abc":     true,
		"/run/containerd-other":     false,
		"/var/tmp/node/kubelet/pod": true,
		"/var/tmp":                  false,
	} {
		if got := under(path, prefixes); got != want {
			t.Errorf("under(%q) = %t, want %t", path, got, want)
		}
	}
}

// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseValues(t *testing.T) {
	in := `# A header comment, not a key's.

image:
  # -- The image.
  # Continued.
  repository: ghcr.io/x
  tag: ""
# -- A list.
tolerations:
  - key: a
    operator: Exists
# -- A map with keys of its own.
metrics:
  port: 8443
  # -- Nested deeper.
  pod:
    labels: {}
extra: |
  text: not a key
  more: text
last: 1
`
	got, err := parseValues(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	want := []valueRow{
		{key: "image.repository", def: "ghcr.io/x", desc: "The image. Continued."},
		{key: "image.tag", def: `""`},
		{key: "tolerations", def: "(a list or map: see values.yaml)", desc: "A list."},
		{key: "metrics", desc: "A map with keys of its own. (the keys below)"},
		{key: "metrics.port", def: "8443"},
		{key: "metrics.pod", desc: "Nested deeper. (the keys below)"},
		{key: "metrics.pod.labels", def: "{}"},
		{key: "extra", def: "(a block of text: see values.yaml)"},
		{key: "last", def: "1"},
	}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(valueRow{})); diff != "" {
		t.Errorf("rows (-want +got):\n%s", diff)
	}
	if _, err := parseValues(strings.NewReader("not a key\n")); err == nil {
		t.Error("a line that is neither a key nor a comment parsed")
	}
}

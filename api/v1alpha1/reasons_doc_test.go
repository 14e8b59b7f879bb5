// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package v1alpha1

import (
	"os"
	"strings"
	"testing"
)

// Every reason of the table has an entry in docs/troubleshooting.md (a heading that names
// it), so a new reason cannot ship without saying what to check.
func TestEveryReasonIsTroubleshot(t *testing.T) {
	data, err := os.ReadFile("../../docs/troubleshooting.md")
	if err != nil {
		t.Fatal(err)
	}
	var headings []string
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, "### ") {
			headings = append(headings, line)
		}
	}
	for reason := range reasonTable {
		found := false
		for _, h := range headings {
			if strings.Contains(h, "`"+reason+"`") {
				found = true
				break
			}
		}
		if !found {
			t.Errorf("docs/troubleshooting.md has no heading for the reason %s", reason)
		}
	}
}

// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
)

// TestPolicyNamesEveryEventReason: the node restriction policy admits the agent's Events
// by reason; its list holds every reason the agent writes an Event with (each Warning
// reason of the table, Applied, Conflict) and no other, so a new reason cannot be refused
// in silence.
func TestPolicyNamesEveryEventReason(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "config", "rbac", "node_restriction_policy.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?s)- name: agentReasons\s+expression: >-\s+\[(.*?)\]`).FindSubmatch(data)
	if m == nil {
		t.Fatal("the policy has no variable agentReasons")
	}
	var got []string
	for _, r := range strings.Split(string(m[1]), ",") {
		got = append(got, strings.Trim(strings.TrimSpace(r), "'"))
	}
	want := []string{numav1.ReasonApplied, "Conflict"}
	for _, r := range numav1.Reasons() {
		if numav1.LookupReason(r).Warning {
			want = append(want, r)
		}
	}
	slices.Sort(got)
	slices.Sort(want)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("agentReasons of the node restriction policy (-want +got):\n%s", diff)
	}
}

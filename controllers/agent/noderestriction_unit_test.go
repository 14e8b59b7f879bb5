// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"bytes"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
)

func TestRefused(t *testing.T) {
	gr := schema.GroupResource{Group: numav1.GroupVersion.Group, Resource: "numanodereports"}
	tests := map[string]struct {
		err         error
		wantRefused bool
		wantErr     bool
	}{
		"accepted":                {err: nil},
		"exists already":          {err: apierrors.NewAlreadyExists(gr, "x")},
		"forbidden by the policy": {err: apierrors.NewForbidden(gr, "x", errors.New("ValidatingAdmissionPolicy 'p' with binding 'p' denied request: no")), wantRefused: true},
		// Only the policy's denial proves the restriction: RBAC's, another admission
		// plugin's or a webhook's refusal says nothing of it.
		"forbidden by RBAC":             {err: apierrors.NewForbidden(gr, "x", errors.New(`User "system:serviceaccount:ns:agent" cannot create resource "numanodereports"`)), wantErr: true},
		"forbidden by a webhook":        {err: apierrors.NewForbidden(gr, "x", errors.New(`admission webhook "deny.example.com" denied the request`)), wantErr: true},
		"a webhook that cannot dry-run": {err: apierrors.NewBadRequest(`admission webhook "w.example.com" does not support dry run`), wantErr: true},
		"invalid, by the schema":        {err: apierrors.NewInvalid(numav1.GroupVersion.WithKind("NumaNodeReport").GroupKind(), "x", nil), wantErr: true},
		"unreachable":                   {err: errors.New("dial tcp: connection refused"), wantErr: true},
		"server error":                  {err: apierrors.NewInternalError(errors.New("etcd")), wantErr: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := refused(tc.err)
			if got != tc.wantRefused || (err != nil) != tc.wantErr {
				t.Errorf("refused(%v) = %t, %v; want %t, error %t", tc.err, got, err, tc.wantRefused, tc.wantErr)
			}
		})
	}
	policyInvalid := apierrors.NewInvalid(numav1.GroupVersion.WithKind("NumaNodeReport").GroupKind(), "x", nil)
	policyInvalid.ErrStatus.Message = "ValidatingAdmissionPolicy 'p' with binding 'p' denied request: no"
	if got, err := refused(policyInvalid); !got || err != nil {
		t.Errorf("refused(Invalid from a ValidatingAdmissionPolicy) = %t, %v; want true", got, err)
	}
}

func TestRestrictionConditions(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	later := t0.Add(time.Hour + 500*time.Millisecond)
	missing := restrictionVerdict{Status: metav1.ConditionFalse, Message: "accepted"}
	held := restrictionVerdict{Status: metav1.ConditionTrue, Message: "refused"}
	unproven := restrictionVerdict{Status: metav1.ConditionUnknown, Message: "the check got no answer that proves the restriction either way: 403"}
	cond := func(v restrictionVerdict, reason string, at time.Time) metav1.Condition {
		return metav1.Condition{Type: numav1.ConditionNodeRestricted, Status: v.Status, Reason: reason, Message: v.Message, LastTransitionTime: metav1.NewTime(at)}
	}
	tests := map[string]struct {
		have []metav1.Condition
		v    restrictionVerdict
		want []metav1.Condition
	}{
		"no answer yet, none before": {v: restrictionVerdict{Status: metav1.ConditionUnknown}},
		"no answer yet, kept":        {have: []metav1.Condition{cond(held, numav1.ReasonNodeRestrictionEnforced, t0)}, v: restrictionVerdict{Status: metav1.ConditionUnknown}, want: []metav1.Condition{cond(held, numav1.ReasonNodeRestrictionEnforced, t0)}},
		"first answer":               {v: held, want: []metav1.Condition{cond(held, numav1.ReasonNodeRestrictionEnforced, later.Truncate(time.Second))}},
		"holds still: time kept":     {have: []metav1.Condition{cond(held, numav1.ReasonNodeRestrictionEnforced, t0)}, v: held, want: []metav1.Condition{cond(held, numav1.ReasonNodeRestrictionEnforced, t0)}},
		"lost":                       {have: []metav1.Condition{cond(held, numav1.ReasonNodeRestrictionEnforced, t0)}, v: missing, want: []metav1.Condition{cond(missing, numav1.ReasonNodeRestrictionMissing, later.Truncate(time.Second))}},
		// Answers that prove neither are a condition of their own, not silence.
		"unproven": {have: []metav1.Condition{cond(held, numav1.ReasonNodeRestrictionEnforced, t0)}, v: unproven, want: []metav1.Condition{cond(unproven, numav1.ReasonNodeRestrictionUnproven, later.Truncate(time.Second))}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, restrictionConditions(tc.have, tc.v, later)); diff != "" {
				t.Errorf("conditions (-want +got):\n%s", diff)
			}
		})
	}
}

func TestProbeReportNameIsNeverTheNode(t *testing.T) {
	for _, node := range []string{"n1", probeReportName("n1"), probeReportName(probeReportName("n1"))} {
		if probeReportName(node) == node {
			t.Errorf("probeReportName(%q) is the node's own name", node)
		}
	}
}

// The policy's agentLabels name the labels the agent publishes, and take every value it
// writes: a label added here without its row in the policy would be refused on every node.
func TestPolicyAllowsThePublishedLabels(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "config", "rbac", "node_restriction_policy.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var policy admissionv1.ValidatingAdmissionPolicy
	if err := yaml.Unmarshal(bytes.Split(data, []byte("\n---"))[0], &policy); err != nil {
		t.Fatalf("decoding the policy: %v", err)
	}
	patterns := map[string]*regexp.Regexp{}
	for _, v := range policy.Spec.Variables {
		if v.Name != "agentLabels" {
			continue
		}
		for _, m := range regexp.MustCompile(`'([^']+)':\s*'([^']+)'`).FindAllStringSubmatch(v.Expression, -1) {
			patterns[m[1]] = regexp.MustCompile(m[2])
		}
	}
	published := map[string][]string{
		LabelKernelSupport: {"prctl", "emulator", "unsupported"},
		LabelNUMABalancing: {"disabled", "normal", "memory-tiering", "normal-memory-tiering", "unknown"},
		LabelNUMANodes:     {"1", "8", "1024"},
		LabelNRI:           {strings.ToLower(numav1.NRIConnected), strings.ToLower(numav1.NRIDisconnected)},
		LabelMemoryPolicy:  {"available", "unavailable"},
		LabelPageMigration: {"available", "unavailable"},
	}
	if diff := cmp.Diff(slices.Sorted(maps.Keys(published)), slices.Sorted(maps.Keys(patterns))); diff != "" {
		t.Errorf("agentLabels keys (-published +policy):\n%s", diff)
	}
	for label, values := range published {
		for _, v := range values {
			if re := patterns[label]; re == nil || !re.MatchString(v) {
				t.Errorf("the policy refuses %s=%s, which the agent publishes", label, v)
			}
		}
	}
	for label, v := range map[string]string{LabelNUMANodes: "lots", LabelKernelSupport: "prctl2", LabelNUMABalancing: "", LabelNRI: "Connected"} {
		if re := patterns[label]; re != nil && re.MatchString(v) {
			t.Errorf("the policy allows %s=%q, which the agent never publishes", label, v)
		}
	}
}

// The NRIConnected condition follows the plugin's state, keeps its transition time while
// the state holds, and goes when the agent has no NRI plugin; other conditions stay.
func TestNRIConditions(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	later := t0.Add(time.Hour + 500*time.Millisecond)
	restricted := metav1.Condition{Type: numav1.ConditionNodeRestricted, Status: metav1.ConditionTrue, Reason: numav1.ReasonNodeRestrictionEnforced, LastTransitionTime: metav1.NewTime(t0)}
	cond := func(connected bool, at time.Time) metav1.Condition {
		got := nriConditions(nil, numav1.NRIDisconnected, at)
		if connected {
			got = nriConditions(nil, numav1.NRIConnected, at)
		}
		return got[0]
	}
	if c := cond(true, t0); c.Status != metav1.ConditionTrue || c.Reason != numav1.ReasonNRIConnected {
		t.Errorf("connected: %+v, want True, %s", c, numav1.ReasonNRIConnected)
	}
	if c := cond(false, t0); c.Status != metav1.ConditionFalse || c.Reason != numav1.ReasonNRINotConnected {
		t.Errorf("disconnected: %+v, want False, %s", c, numav1.ReasonNRINotConnected)
	}
	tests := map[string]struct {
		have []metav1.Condition
		nri  string
		want []metav1.Condition
	}{
		"no NRI, none before":    {},
		"no NRI: removed":        {have: []metav1.Condition{restricted, cond(true, t0)}, want: []metav1.Condition{restricted}},
		"first state":            {have: []metav1.Condition{restricted}, nri: numav1.NRIDisconnected, want: []metav1.Condition{restricted, cond(false, later.Truncate(time.Second))}},
		"connected still: kept":  {have: []metav1.Condition{cond(true, t0)}, nri: numav1.NRIConnected, want: []metav1.Condition{cond(true, t0)}},
		"lost: a new transition": {have: []metav1.Condition{cond(true, t0)}, nri: numav1.NRIDisconnected, want: []metav1.Condition{cond(false, later.Truncate(time.Second))}},
		"back: a new transition": {have: []metav1.Condition{cond(false, t0)}, nri: numav1.NRIConnected, want: []metav1.Condition{cond(true, later.Truncate(time.Second))}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, nriConditions(slices.Clone(tc.have), tc.nri, later)); diff != "" {
				t.Errorf("conditions (-want +got):\n%s", diff)
			}
		})
	}
}

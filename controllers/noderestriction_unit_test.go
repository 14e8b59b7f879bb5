package controllers

import (
	"bytes"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
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
		"accepted":               {err: nil},
		"exists already":         {err: apierrors.NewAlreadyExists(gr, "x")},
		"forbidden":              {err: apierrors.NewForbidden(gr, "x", errors.New("ValidatingAdmissionPolicy 'p' denied request")), wantRefused: true},
		"invalid, by the schema": {err: apierrors.NewInvalid(numav1.GroupVersion.WithKind("NumaNodeReport").GroupKind(), "x", nil), wantErr: true},
		"unreachable":            {err: errors.New("dial tcp: connection refused"), wantErr: true},
		"server error":           {err: apierrors.NewInternalError(errors.New("etcd")), wantErr: true},
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
	data, err := os.ReadFile(filepath.Join("..", "config", "rbac", "node_restriction_policy.yaml"))
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
	for label, v := range map[string]string{LabelNUMANodes: "lots", LabelKernelSupport: "prctl2", LabelNUMABalancing: ""} {
		if re := patterns[label]; re != nil && re.MatchString(v) {
			t.Errorf("the policy allows %s=%q, which the agent never publishes", label, v)
		}
	}
}

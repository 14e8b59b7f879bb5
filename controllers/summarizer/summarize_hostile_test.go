// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package summarizer

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
	"github.com/numapref/numapref/internal/testutil/builders"
	"github.com/numapref/numapref/internal/testutil/ctrltest"
)

// An agent writes its own node's report, and a buggy or compromised one can write there
// whatever the CRD lets through, or more. The summarizer adds up none of such an entry: the
// other nodes are counted as before, the node is named as InvalidReport, and the status
// stays one the API accepts (a reason such as "x y" in a condition would make it
// unwritable for good).
func TestSummarizeRefusesHostileEntries(t *testing.T) {
	good := report("good", numav1.PreferenceReport{Pods: 2, Containers: 2, Tasks: 4}, "normal")
	huge := numav1.PreferenceReport{Pods: math.MaxInt32, Containers: math.MaxInt32, Tasks: math.MaxInt32,
		Skipped: []numav1.ReasonCount{{Reason: numav1.ReasonKernelUnsupported, Count: math.MaxInt32}}}
	skipped := func(reason string, n int32) numav1.PreferenceReport {
		return numav1.PreferenceReport{Pods: 1, Containers: 1, Tasks: 1, Skipped: []numav1.ReasonCount{{Reason: reason, Count: n}}}
	}
	tests := map[string]struct {
		hostile []numav1.PreferenceReport // entries of nodes bad-0, bad-1, ...
		why     string                    // what the first refusal says
	}{
		"a reason that is no condition reason": {hostile: []numav1.PreferenceReport{skipped("x y", 5)}, why: `unknown reason "x y"`},
		"an unknown CamelCase reason":          {hostile: []numav1.PreferenceReport{skipped("SomethingNew", 5)}, why: `unknown reason "SomethingNew"`},
		"a negative pod count":                 {hostile: []numav1.PreferenceReport{{Pods: -3, Containers: 1}}, why: "pods count -3"},
		"a negative reason count": {hostile: []numav1.PreferenceReport{{Pods: 1,
			Failed: []numav1.ReasonCount{{Reason: numav1.ReasonPermissionDenied, Count: -1}}}}, why: "PermissionDenied count -1"},
		"tasks past any node's":          {hostile: []numav1.PreferenceReport{{Pods: 1, Tasks: numav1.MaxEntryCount + 1}}, why: "tasks count 4194305"},
		"a negative memory policy count": {hostile: []numav1.PreferenceReport{{Pods: 1, Containers: 1, MemoryPolicy: -1}}, why: "memoryPolicy count -1"},
		"2^31-1 counts on several nodes": {hostile: []numav1.PreferenceReport{huge, huge, huge}, why: "pods count 2147483647"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			p := builders.MakePreference("ns", "p").Generation(3).Node(1).Obj()
			reports := []numav1.NumaNodeReport{good}
			var want []numav1.NodeProblem
			for i, e := range tc.hostile {
				node := fmt.Sprintf("bad-%d", i)
				reports = append(reports, report(node, e, "normal"))
				want = append(want, numav1.NodeProblem{NodeName: node, Reason: numav1.ReasonInvalidReport, Count: 1})
			}
			st, refused := summarize(p, reports)
			if diff := cmp.Diff(numav1.Summary{Nodes: 1, Pods: 2, Containers: 2, Tasks: 4}, st.Summary); diff != "" {
				t.Errorf("summary: only node good counts (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(want, st.ProblemNodes); diff != "" {
				t.Errorf("problem nodes (-want +got):\n%s", diff)
			}
			if len(refused) != len(tc.hostile) || !strings.Contains(refused[0].err.Error(), tc.why) {
				t.Errorf("refused %v, want %d nodes, the first because %q", refused, len(tc.hostile), tc.why)
			}
			assertWritable(t, st)
			if degraded := ctrltest.Condition(&numav1.NumaPreference{Status: st}, numav1.ConditionDegraded); degraded.Reason != numav1.ReasonInvalidReport {
				t.Errorf("Degraded = %s %q, want InvalidReport", degraded.Reason, degraded.Message)
			}
		})
	}
}

// A node whose only entry is refused is unknown, not a node without pods.
func TestSummarizeRefusedNodeIsNotNoMatchingPods(t *testing.T) {
	p := builders.MakePreference("ns", "p").Generation(3).Node(1).Obj()
	st, _ := summarize(p, []numav1.NumaNodeReport{report("bad", numav1.PreferenceReport{Pods: -1}, "normal")})
	if ready := st.Conditions[0]; ready.Reason != numav1.ReasonPartiallyApplied {
		t.Errorf("Ready = %s %q, want PartiallyApplied", ready.Reason, ready.Message)
	}
}

// Valid counts can still pass 2^31-1 together: the sums saturate, and are never negative.
func TestSummarizeSaturatesSums(t *testing.T) {
	p := builders.MakePreference("ns", "p").Generation(3).Node(1).Obj()
	const n = numav1.MaxEntryCount
	var reports []numav1.NumaNodeReport
	for i := range 600 { // 600 × 2^22 > 2^31
		reports = append(reports, report(fmt.Sprintf("node-%03d", i), numav1.PreferenceReport{Pods: n, Containers: n, Tasks: n,
			Skipped: []numav1.ReasonCount{{Reason: numav1.ReasonKernelUnsupported, Count: n}, {Reason: numav1.ReasonOverriddenByAnnotation, Count: n}},
			Failed:  []numav1.ReasonCount{{Reason: numav1.ReasonKernelError, Count: n}}}, "normal"))
	}
	// One node repeats a reason 600 times (the CRD's list map refuses that; the summarizer
	// does not rely on it): its own total passes 2^31 too.
	many := make([]numav1.ReasonCount, 600)
	for i := range many {
		many[i] = numav1.ReasonCount{Reason: numav1.ReasonCgroupError, Count: n}
	}
	reports = append(reports, report("many", numav1.PreferenceReport{Pods: 1, Skipped: many}, "normal"))

	st, refused := summarize(p, reports)
	if len(refused) != 0 {
		t.Fatalf("refused %v: every count is within MaxEntryCount", refused)
	}
	if diff := cmp.Diff(numav1.Summary{Nodes: 601, Pods: math.MaxInt32, Containers: math.MaxInt32, Tasks: math.MaxInt32}, st.Summary); diff != "" {
		t.Errorf("summary (-want +got):\n%s", diff)
	}
	if first := st.ProblemNodes[0]; first.NodeName != "many" || first.Count != math.MaxInt32 {
		t.Errorf("first problem node = %+v, want node many with %d", first, math.MaxInt32)
	}
	for _, c := range st.Conditions {
		if strings.Contains(c.Message, "-") {
			t.Errorf("condition %s has a negative number: %q", c.Type, c.Message)
		}
	}
	assertWritable(t, st)
}

// Refused nodes come first in problemNodes, whatever the counts of the others.
func TestProblemNodesPutRefusedFirst(t *testing.T) {
	p := builders.MakePreference("ns", "p").Generation(3).Node(1).Obj()
	var reports []numav1.NumaNodeReport
	for i := range numav1.MaxProblemNodes + 2 {
		reports = append(reports, report(fmt.Sprintf("node-%02d", i), numav1.PreferenceReport{Pods: 1,
			Skipped: []numav1.ReasonCount{{Reason: numav1.ReasonKernelUnsupported, Count: 100}}}, "normal"))
	}
	reports = append(reports, report("z-bad", numav1.PreferenceReport{Pods: 1, Skipped: []numav1.ReasonCount{{Reason: "Nope", Count: 1}}}, "normal"))
	st, _ := summarize(p, reports)
	if first := st.ProblemNodes[0]; first.NodeName != "z-bad" || first.Reason != numav1.ReasonInvalidReport {
		t.Errorf("first problem node = %+v, want z-bad with InvalidReport", first)
	}
}

// assertWritable fails when the API would refuse st: its conditions, and the limits the
// CRD puts on its counts and reasons.
func assertWritable(t *testing.T, st numav1.NumaPreferenceStatus) {
	t.Helper()
	if errs := metav1validation.ValidateConditions(st.Conditions, field.NewPath("status", "conditions")); len(errs) > 0 {
		t.Errorf("the API would refuse the conditions: %v", errs.ToAggregate())
	}
	s := st.Summary
	for what, n := range map[string]int32{"nodes": s.Nodes, "pods": s.Pods, "containers": s.Containers, "tasks": s.Tasks} {
		if n < 0 {
			t.Errorf("summary.%s = %d, negative", what, n)
		}
	}
	for _, pn := range st.ProblemNodes {
		if pn.Count < 0 || !numav1.KnownReason(pn.Reason) {
			t.Errorf("problem node %+v: a negative count or an unknown reason", pn)
		}
	}
}

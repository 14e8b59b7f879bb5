// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package summarizer

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
)

// The summarizer holds a write back until the burst of report changes is quiet, or has
// lasted MaxDelay, and until MinInterval has passed since its last write.
func TestSummaryCoalescing(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Unix(1000, 0))
	r := NewSummaryReconciler(nil, SummaryOptions{Quiet: time.Second, MaxDelay: 5 * time.Second, MinInterval: 2 * time.Second, Clock: clk})
	key := types.NamespacedName{Namespace: "ns", Name: "p"}
	step := func(d time.Duration) { clk.SetTime(clk.Now().Add(d)) }

	if w := r.wait(key, false); w > 0 {
		t.Fatalf("nothing pending and never written: wait %s, want none", w)
	}
	if !r.changed(key) {
		t.Fatal("the first change must start a burst")
	}
	if w := r.wait(key, false); w != time.Second {
		t.Fatalf("right after a change: wait %s, want the quiet time 1s", w)
	}
	// Changes every 500ms keep the burst open until MaxDelay.
	for range 8 {
		step(500 * time.Millisecond)
		if r.changed(key) {
			t.Fatal("a change within a burst started a new one")
		}
	}
	if w := r.wait(key, false); w != time.Second {
		t.Fatalf("4s into a busy burst: wait %s, want 1s (MaxDelay is 1s away)", w)
	}
	step(500 * time.Millisecond)
	r.changed(key)
	if w := r.wait(key, false); w != 500*time.Millisecond {
		t.Fatalf("4.5s into a busy burst: wait %s, want 500ms until MaxDelay", w)
	}
	step(500 * time.Millisecond)
	if w := r.wait(key, false); w > 0 {
		t.Fatalf("at MaxDelay: wait %s, want none", w)
	}
	r.settled(key, true)
	// Just written: a new change waits for MinInterval even once quiet; a new generation too.
	r.changed(key)
	step(time.Second)
	if w := r.wait(key, false); w != time.Second {
		t.Fatalf("1s after a write: wait %s, want 1s more of MinInterval", w)
	}
	if w := r.wait(key, true); w != time.Second {
		t.Fatalf("a new generation 1s after a write: wait %s, want 1s", w)
	}
	step(time.Second)
	if w := r.wait(key, false); w > 0 {
		t.Fatalf("quiet and MinInterval passed: wait %s, want none", w)
	}
}

func TestChangedEntries(t *testing.T) {
	a := report("n", numav1.PreferenceReport{Pods: 1, Tasks: 3}, "normal")
	b := a.DeepCopy()
	b.Status.Preferences[0].Tasks = 4
	b.Status.Preferences = append(b.Status.Preferences, numav1.PreferenceReport{Namespace: "ns", Name: "q"})
	key := func(n string) types.NamespacedName { return types.NamespacedName{Namespace: "ns", Name: n} }
	tests := map[string]struct {
		old, cur *numav1.NumaNodeReport
		want     map[types.NamespacedName]bool
	}{
		"created":           {nil, &a, map[types.NamespacedName]bool{key("p"): true}},
		"deleted":           {&a, nil, map[types.NamespacedName]bool{key("p"): true}},
		"unchanged":         {&a, a.DeepCopy(), map[types.NamespacedName]bool{}},
		"changed and added": {&a, b, map[types.NamespacedName]bool{key("p"): true, key("q"): true}},
		"restriction lost":  {&a, ptr.To(unrestricted(a)), map[types.NamespacedName]bool{key("p"): true}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, changedEntries(tc.old, tc.cur)); diff != "" {
				t.Errorf("changedEntries (-want +got):\n%s", diff)
			}
		})
	}
}

// Every status write reaches every agent: with many reports, the summarizer holds writes
// back for PerNode per report, so that a burst longer than MaxDelay is still one write.
// A spec change waits MinInterval only.
func TestSummaryCoalescingGrowsWithReports(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Unix(1000, 0))
	r := NewSummaryReconciler(nil, SummaryOptions{Quiet: time.Second, MaxDelay: 5 * time.Second, MinInterval: 2 * time.Second,
		PerNode: 10 * time.Millisecond, Clock: clk})
	key := types.NamespacedName{Namespace: "ns", Name: "p"}
	step := func(d time.Duration) { clk.SetTime(clk.Now().Add(d)) }
	for range 1000 {
		r.counted(1) // 1,000 reports: MaxDelay and MinInterval are 10s
	}

	r.changed(key)
	for range 12 { // a burst of changes every 500ms for 6s
		step(500 * time.Millisecond)
		r.changed(key)
	}
	if w := r.wait(key, false); w != time.Second {
		t.Fatalf("6s into a busy burst at 1,000 reports: wait %s, want 1s of quiet (MaxDelay is 10s)", w)
	}
	for range 7 {
		step(500 * time.Millisecond)
		r.changed(key)
	}
	if w := r.wait(key, false); w != 500*time.Millisecond {
		t.Fatalf("9.5s into a busy burst: wait %s, want 500ms until the 10s MaxDelay", w)
	}
	step(500 * time.Millisecond)
	if w := r.wait(key, false); w > 0 {
		t.Fatalf("at the 10s MaxDelay: wait %s, want none", w)
	}
	r.settled(key, true)
	r.changed(key)
	step(3 * time.Second)
	if w := r.wait(key, false); w != 7*time.Second {
		t.Fatalf("quiet, 3s after a write: wait %s, want 7s more of the 10s MinInterval", w)
	}
	if w := r.wait(key, true); w > 0 {
		t.Fatalf("a new generation 3s after a write: wait %s, want none (MinInterval 2s)", w)
	}

	// Nodes go: back to the configured times.
	for range 900 {
		r.counted(-1)
	}
	if w := r.wait(key, false); w > 0 {
		t.Fatalf("quiet, 3s after a write, at 100 reports: wait %s, want none (MinInterval 2s)", w)
	}
}

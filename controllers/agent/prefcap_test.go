// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
	"github.com/numapref/numapref/internal/metrics"
	"github.com/numapref/numapref/internal/testutil/builders"
)

// TestPreferenceCap: of a namespace, the cache keeps whole what the summarizer did not put
// past the cap, up to twice the cap while unjudged, and names only for the rest; a
// verdict taken back and a deletion let others in; each held one is counted by why; the
// transform is idempotent and trusts no annotation from the API.
func TestPreferenceCap(t *testing.T) {
	held := func(why string) float64 { return testutil.ToFloat64(metrics.PreferencesHeldBack.WithLabelValues(why)) }
	base := map[string]float64{metrics.HeldOverCap: held(metrics.HeldOverCap), metrics.HeldUnjudged: held(metrics.HeldUnjudged)}
	counted := func(t *testing.T, overCap, unjudged float64) {
		t.Helper()
		if got := held(metrics.HeldOverCap) - base[metrics.HeldOverCap]; got != overCap {
			t.Errorf("held back over_cap: %v, want %v", got, overCap)
		}
		if got := held(metrics.HeldUnjudged) - base[metrics.HeldUnjudged]; got != unjudged {
			t.Errorf("held back unjudged: %v, want %v", got, unjudged)
		}
	}
	c := NewPreferenceCap(1) // 1 applied, 2 whole while unjudged
	pref := func(ns, name string) *numav1.NumaPreference {
		p := builders.MakePreference(ns, name).Selector("app", "db").Node(1).Obj()
		p.UID = types.UID(ns + "/" + name)
		return p
	}
	keep := func(p *numav1.NumaPreference) *numav1.NumaPreference {
		t.Helper()
		out, err := c.Transform(p)
		if err != nil {
			t.Fatal(err)
		}
		again, _ := c.Transform(out)
		if diff := cmp.Diff(out, again); diff != "" {
			t.Fatalf("the transform is not idempotent (-once +twice):\n%s", diff)
		}
		return out.(*numav1.NumaPreference)
	}
	whole := func(t *testing.T, p *numav1.NumaPreference, want bool) {
		t.Helper()
		if HeldBack(p) == want || (p.Spec.Selector.MatchLabels != nil) != want {
			t.Errorf("%s kept whole: %v (spec %+v), want %v", p.Name, !HeldBack(p), p.Spec, want)
		}
	}

	a, b, x := pref("ns", "a"), pref("ns", "b"), pref("ns", "x")
	whole(t, keep(a), true)
	whole(t, keep(b), true)
	third := keep(x)
	whole(t, third, false)
	if third.Name != "x" || third.UID != x.UID || third.Annotations[heldBackKey] != metrics.HeldUnjudged {
		t.Errorf("the stub of x: %+v", third.ObjectMeta)
	}
	whole(t, keep(pref("other", "a")), true)
	counted(t, 0, 1)

	// The summarizer's verdict on b: b is held back, and x, at its next change, is let in.
	judged := b.DeepCopy()
	judged.Status.Conditions = []metav1.Condition{{Type: numav1.ConditionReady, Status: "False", Reason: numav1.ReasonTooManyPreferences}}
	whole(t, keep(judged), false)
	counted(t, 1, 1)
	whole(t, keep(x), true)
	counted(t, 1, 0)

	// The verdict taken back while the namespace has its two whole: b waits for room.
	whole(t, keep(b), false)
	counted(t, 0, 1)
	c.Forget(toolscache.DeletedFinalStateUnknown{Key: "ns/a", Obj: a})
	whole(t, keep(b), true)
	counted(t, 0, 0)

	// A valid annotation of the API's with the stub's look changes nothing.
	forged := pref("third", "f")
	forged.Annotations = map[string]string{"numapref.io/held-back": metrics.HeldOverCap}
	if got := keep(forged); HeldBack(got) || got.Annotations != nil {
		t.Errorf("an API annotation made a stub or was kept: %+v", got.ObjectMeta)
	}

	// No cap: every preference whole.
	var none *PreferenceCap
	for i := range 5 {
		out, _ := none.Transform(pref("n", string(rune('a'+i))))
		whole(t, out.(*numav1.NumaPreference), true)
	}
}

// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package summarizer

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
	"github.com/numapref/numapref/internal/testutil/builders"
	"github.com/numapref/numapref/internal/testutil/largest"
)

// TestSummarizeReadsOnlyWhatTheCacheKeeps: the summary of a preference as the summarizer's
// cache keeps it (summarizerCacheOptions' transform) is the summary of the whole object,
// and the cache keeps none of its selector, containers or metadata.
func TestSummarizeReadsOnlyWhatTheCacheKeeps(t *testing.T) {
	var transform func(any) (any, error)
	for obj, by := range summarizerCacheOptions().ByObject {
		if _, ok := obj.(*numav1.NumaPreference); ok {
			transform = by.Transform
		}
	}
	if transform == nil {
		t.Fatal("the summarizer's cache has no transform for NumaPreferences")
	}
	full := largest.NumaPreference("ns", 1)
	full.Name, full.Generation = "p", 3
	full.Spec.Mode, full.Spec.Node = numav1.PlacementModeStatic, ptrTo(int32(1))
	full.Annotations = map[string]string{"example.com/notes": strings.Repeat("a", 1<<16)}
	full.Labels = map[string]string{"l": "v"}
	full.Status.Conditions = []metav1.Condition{{Type: numav1.ConditionReady, Status: "True", Reason: numav1.ReasonApplied,
		LastTransitionTime: metav1.NewTime(time.Unix(100, 0))}}
	reports := []numav1.NumaNodeReport{
		report("a", numav1.PreferenceReport{Pods: 1, Containers: 2, Tasks: 10}, "normal"),
		report("b", numav1.PreferenceReport{Pods: 1, Skipped: []numav1.ReasonCount{{Reason: numav1.ReasonKernelUnsupported, Count: 1}}}, "disabled"),
	}
	cached, err := transform(full.DeepCopy())
	if err != nil {
		t.Fatal(err)
	}
	lean := cached.(*numav1.NumaPreference)
	if lean.Annotations != nil || lean.Labels != nil || lean.Spec.Selector.MatchLabels != nil || lean.Spec.Containers != nil {
		t.Errorf("the summarizer's cache keeps more than the summary reads: %+v", lean.ObjectMeta)
	}
	again, _ := transform(lean)
	if diff := cmp.Diff(lean, again); diff != "" {
		t.Errorf("the transform is not idempotent (-once +twice):\n%s", diff)
	}
	want, _ := summarize(full, reports)
	got, _ := summarize(lean, reports)
	if diff := cmp.Diff(want, got, cmpopts.IgnoreFields(metav1.Condition{}, "LastTransitionTime")); diff != "" {
		t.Errorf("summary of the cached preference (-whole +cached):\n%s", diff)
	}
}

func ptrTo[T any](v T) *T { return &v }

// TestPreferenceCapEdges: a preference past its namespace's cap gets TooManyPreferences;
// when one within the cap goes, the first past it is enqueued to be let in, and when an
// older one comes the one it pushes out is enqueued; other namespaces are untouched.
func TestPreferenceCapEdges(t *testing.T) {
	r := NewSummaryReconciler(nil, SummaryOptions{MaxPerNamespace: 2})
	h := r.preferenceHandler()
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	defer q.ShutDown()
	drain := func() []string {
		var out []string
		for q.Len() > 0 {
			req, _ := q.Get()
			out = append(out, req.Name)
			q.Done(req)
			q.Forget(req)
		}
		return out
	}
	at := func(s int64) metav1.Time { return metav1.NewTime(time.Unix(s, 0)) }
	pref := func(ns, name string, created int64) *numav1.NumaPreference {
		return builders.MakePreference(ns, name).CreatedAt(at(created)).Obj()
	}
	ctx := context.Background()
	prefs := map[string]*numav1.NumaPreference{}
	for i, name := range []string{"p0", "p1", "p2", "p3"} {
		prefs[name] = pref("ns", name, int64(10+i))
		h.Create(ctx, event.TypedCreateEvent[*numav1.NumaPreference]{Object: prefs[name], IsInInitialList: true}, q)
	}
	h.Create(ctx, event.TypedCreateEvent[*numav1.NumaPreference]{Object: pref("other", "q", 1), IsInInitialList: true}, q)
	drain()
	for name, want := range map[string]bool{"p0": false, "p1": false, "p2": true, "p3": true} {
		if got, total := r.overCap(prefs[name]); got != want || total != 4 {
			t.Errorf("%s over the cap: %v of %d, want %v of 4", name, got, total, want)
		}
	}
	if over, _ := r.overCap(pref("other", "q", 1)); over {
		t.Error("a preference of another namespace is over the cap")
	}

	h.Delete(ctx, event.TypedDeleteEvent[*numav1.NumaPreference]{Object: prefs["p1"]}, q)
	if got := drain(); !contains(got, "p2") {
		t.Errorf("deleting p1 within the cap enqueued %v, want p2 (let in) among them", got)
	}
	if over, _ := r.overCap(prefs["p2"]); over {
		t.Error("p2 still over the cap after p1 went")
	}

	// An older one comes (a tie of creation times broken by name): p2 is pushed out.
	older := pref("ns", "a", 10)
	h.Create(ctx, event.TypedCreateEvent[*numav1.NumaPreference]{Object: older}, q)
	if got := drain(); !contains(got, "p2") || !contains(got, "a") {
		t.Errorf("an older preference's coming enqueued %v, want it and p2 (pushed out)", got)
	}
	if over, _ := r.overCap(prefs["p2"]); !over {
		t.Error("p2 not over the cap after an older one came")
	}

	// The newest coming past the cap moves nobody else.
	h.Create(ctx, event.TypedCreateEvent[*numav1.NumaPreference]{Object: pref("ns", "p9", 99)}, q)
	if got := drain(); fmt.Sprint(got) != "[p9]" {
		t.Errorf("the newest preference's coming enqueued %v, want only itself", got)
	}
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// TestOverCapStatus: the verdict says why and counts nothing.
func TestOverCapStatus(t *testing.T) {
	p := builders.MakePreference("ns", "p").Generation(2).Obj()
	p.Status.Summary = numav1.Summary{Pods: 3}
	p.Status.Conditions = []metav1.Condition{{Type: numav1.ConditionConflict, Status: "False", Reason: numav1.ReasonNoConflict}}
	st := overCapStatus(p, 300, 128)
	if st.Summary != (numav1.Summary{}) || st.ObservedGeneration != 2 {
		t.Errorf("summary %+v at generation %d, want nothing counted at 2", st.Summary, st.ObservedGeneration)
	}
	for _, c := range []struct {
		typ    string
		status metav1.ConditionStatus
	}{{numav1.ConditionReady, "False"}, {numav1.ConditionDegraded, "True"}} {
		got := meta.FindStatusCondition(st.Conditions, c.typ)
		if got == nil || got.Status != c.status || got.Reason != numav1.ReasonTooManyPreferences || !strings.Contains(got.Message, "300") {
			t.Errorf("%s: %+v, want %s with reason %s naming the count", c.typ, got, c.status, numav1.ReasonTooManyPreferences)
		}
	}
	if meta.FindStatusCondition(st.Conditions, numav1.ConditionConflict) != nil {
		t.Error("Conflict kept on a preference nobody applies")
	}
}

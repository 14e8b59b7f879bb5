// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package summarizer

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
	"github.com/numapref/numapref/controllers/internal/status"
)

// DefaultMaxPerNamespace is the default of SummaryOptions.MaxPerNamespace and of the
// agents' PreferenceCap: how many NumaPreferences of a namespace are applied.
const DefaultMaxPerNamespace = status.DefaultMaxPreferencesPerNamespace

// summarizerPreference is what the summarizer keeps of a NumaPreference: its identity,
// its age, the two spec fields a status message names, and the status it writes itself
// (bounded by the CRD). Selectors, containers, labels, annotations and managedFields go:
// a tenant's objects then cost the summarizer a few hundred bytes each, whatever their
// size. summarize reads nothing else (TestSummarizeReadsOnlyWhatTheCacheKeeps).
func summarizerPreference(obj any) (any, error) {
	p, ok := obj.(*numav1.NumaPreference)
	if !ok {
		return obj, nil
	}
	return &numav1.NumaPreference{
		TypeMeta:   p.TypeMeta,
		ObjectMeta: status.Identity(&p.ObjectMeta),
		Spec:       numav1.NumaPreferenceSpec{Mode: p.Spec.Mode, Node: p.Spec.Node},
		Status:     p.Status,
	}, nil
}

// ageIndex orders each namespace's NumaPreferences as the cap keeps them
// (status.CompareAge), so that a preference's rank costs a binary search, not a listing
// of its namespace. The preference handler keeps it current.
type ageIndex struct {
	mu   sync.Mutex
	byNS map[string][]*numav1.NumaPreference // sorted; only Name and CreationTimestamp are read
}

func newAgeIndex() *ageIndex { return &ageIndex{byNS: map[string][]*numav1.NumaPreference{}} }

// search is where p is, or would be, in its namespace's order.
func (x *ageIndex) search(p *numav1.NumaPreference) (int, bool) {
	return slices.BinarySearchFunc(x.byNS[p.Namespace], p, status.CompareAge)
}

// add puts p in its namespace's order and returns its rank.
func (x *ageIndex) add(p *numav1.NumaPreference) int {
	x.mu.Lock()
	defer x.mu.Unlock()
	i, found := x.search(p)
	if !found {
		key := &numav1.NumaPreference{ObjectMeta: metav1.ObjectMeta{Name: p.Name, CreationTimestamp: p.CreationTimestamp}}
		x.byNS[p.Namespace] = slices.Insert(x.byNS[p.Namespace], i, key)
	}
	return i
}

// remove takes p out of its namespace's order and returns the rank it had.
func (x *ageIndex) remove(p *numav1.NumaPreference) (int, bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	i, found := x.search(p)
	if !found {
		return 0, false
	}
	x.byNS[p.Namespace] = slices.Delete(x.byNS[p.Namespace], i, i+1)
	if len(x.byNS[p.Namespace]) == 0 {
		delete(x.byNS, p.Namespace)
	}
	return i, true
}

// rank is p's rank in its namespace (0: the oldest), and how many the namespace holds.
func (x *ageIndex) rank(p *numav1.NumaPreference) (rank, total int) {
	x.mu.Lock()
	defer x.mu.Unlock()
	i, _ := x.search(p)
	return i, len(x.byNS[p.Namespace])
}

// at is the name of the preference of rank i in namespace ns.
func (x *ageIndex) at(ns string, i int) (string, bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if i < 0 || i >= len(x.byNS[ns]) {
		return "", false
	}
	return x.byNS[ns][i].Name, true
}

// preferenceHandler enqueues a preference on each of its events, keeps the age index
// current, and when a preference comes or goes within the cap of its namespace also
// enqueues the one its coming pushed past the cap, or its going let in.
func (r *SummaryReconciler) preferenceHandler() handler.TypedEventHandler[*numav1.NumaPreference, reconcile.Request] {
	type queue = workqueue.TypedRateLimitingInterface[reconcile.Request]
	self := func(q queue, p *numav1.NumaPreference) {
		q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Namespace: p.Namespace, Name: p.Name}})
	}
	edge := func(q queue, ns string, rank int) {
		if limit := r.opts.MaxPerNamespace; limit > 0 && rank < limit {
			// On a coming, the one now at the cap's rank was pushed out; on a going, the
			// one now just inside it was let in.
			for _, i := range []int{limit - 1, limit} {
				if name, ok := r.ages.at(ns, i); ok {
					q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}})
				}
			}
		}
	}
	return handler.TypedFuncs[*numav1.NumaPreference, reconcile.Request]{
		CreateFunc: func(_ context.Context, e event.TypedCreateEvent[*numav1.NumaPreference], q queue) {
			rank := r.ages.add(e.Object)
			self(q, e.Object)
			if !e.IsInInitialList { // each of those is reconciled with its own rank anyway
				edge(q, e.Object.Namespace, rank)
			}
		},
		UpdateFunc: func(_ context.Context, e event.TypedUpdateEvent[*numav1.NumaPreference], q queue) {
			self(q, e.ObjectNew)
		},
		DeleteFunc: func(_ context.Context, e event.TypedDeleteEvent[*numav1.NumaPreference], q queue) {
			self(q, e.Object)
			if rank, ok := r.ages.remove(e.Object); ok {
				edge(q, e.Object.Namespace, rank)
			}
		},
		GenericFunc: func(_ context.Context, e event.TypedGenericEvent[*numav1.NumaPreference], q queue) {
			self(q, e.Object)
		},
	}
}

// overCap says whether pref is past its namespace's cap, and how many its namespace holds.
func (r *SummaryReconciler) overCap(pref *numav1.NumaPreference) (bool, int) {
	if r.opts.MaxPerNamespace <= 0 {
		return false, 0
	}
	rank, total := r.ages.rank(pref)
	return rank >= r.opts.MaxPerNamespace, total
}

// overCapStatus is the status of a preference past its namespace's cap: Ready False and
// Degraded True with reason TooManyPreferences, nothing counted. Every agent keeps only its
// name (controllers/agent's PreferenceCap reads the reason) and applies it to no pod.
func overCapStatus(pref *numav1.NumaPreference, total, limit int) numav1.NumaPreferenceStatus {
	st := *pref.Status.DeepCopy()
	st.ObservedGeneration = pref.Generation
	st.Summary = numav1.Summary{}
	st.ProblemNodes = nil
	msg := fmt.Sprintf("namespace %s holds %d NumaPreferences, more than the %d numapref applies per namespace "+
		"(--max-preferences-per-namespace); the %d oldest are applied and this one is not: no agent keeps more than its name. "+
		"Delete older preferences of this namespace to let it in", pref.Namespace, total, limit, limit)
	for _, t := range []string{numav1.ConditionReady, numav1.ConditionDegraded} {
		c := metav1.Condition{Type: t, Status: metav1.ConditionFalse, ObservedGeneration: pref.Generation,
			Reason: numav1.ReasonTooManyPreferences, Message: msg}
		if t == numav1.ConditionDegraded {
			c.Status = metav1.ConditionTrue
		}
		meta.SetStatusCondition(&st.Conditions, c)
	}
	for _, t := range []string{numav1.ConditionConflict, numav1.ConditionEffective, numav1.ConditionNodeRestricted} {
		meta.RemoveStatusCondition(&st.Conditions, t)
	}
	return st
}

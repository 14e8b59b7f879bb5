// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
	"github.com/numapref/numapref/controllers/internal/status"
	"github.com/numapref/numapref/internal/metrics"
)

// heldBackKey marks a NumaPreference the cache keeps only by name. It is not a valid
// annotation key (it holds a space), so no object from the API carries it: only
// PreferenceCap makes it, and a transform of its own stub keeps it as it is.
const heldBackKey = "numapref held-back"

// Why a preference is held back: the values of heldBackKey and of the metric's label.
const (
	heldOverCap  = metrics.HeldOverCap
	heldUnjudged = metrics.HeldUnjudged
)

// PreferenceCap bounds what an agent's cache keeps of each namespace's NumaPreferences, so
// that no tenant can grow every agent's memory with objects, however many it makes. Past
// its namespace's cap (the summarizer's verdict, status.OverCap) a preference is kept by
// name only; a namespace that holds twice the cap whole while the summarizer has not
// judged the rest (it writes one verdict per new object, a flood outruns it) has the rest
// kept by name too. A preference kept by name selects nothing (its spec is empty). Both
// are counted in numapref_preferences_held_back, by why.
//
// The cap's own order (the oldest of a namespace, status.CompareAge) is the summarizer's:
// in steady state an agent keeps whole exactly the preferences the summarizer judged
// within the cap. One held back for want of room while unjudged is taken whole at its next
// change once there is room (the summarizer writes every preference's status at least
// once), or when the agent lists again.
type PreferenceCap struct {
	whole int // preferences kept whole per namespace: twice the cap

	mu   sync.Mutex
	kept map[string]map[types.UID]bool // namespace → kept whole
	held map[types.UID]string          // kept by name → why
}

// NewPreferenceCap keeps perNamespace preferences of each namespace whole (and, while
// the summarizer has not judged the others, up to twice that). perNamespace <= 0 keeps
// every preference whole.
func NewPreferenceCap(perNamespace int) *PreferenceCap {
	return &PreferenceCap{whole: 2 * perNamespace, kept: map[string]map[types.UID]bool{}, held: map[types.UID]string{}}
}

// Transform is the cache's transform of NumaPreferences: what the agent reads of one kept
// whole (agentPreference), or its name only. It is idempotent, as an informer needs:
// the objects of a watch list pass through it twice.
func (c *PreferenceCap) Transform(obj any) (any, error) {
	p, ok := obj.(*numav1.NumaPreference)
	if !ok {
		return obj, nil
	}
	if _, stub := p.Annotations[heldBackKey]; stub {
		return p, nil
	}
	if c == nil || c.whole <= 0 {
		return agentPreference(p)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if status.OverCap(p) {
		c.release(p.Namespace, p.UID)
		return c.hold(p, heldOverCap), nil
	}
	ns := c.kept[p.Namespace]
	if !ns[p.UID] && len(ns) >= c.whole {
		return c.hold(p, heldUnjudged), nil
	}
	if ns == nil {
		ns = map[types.UID]bool{}
		c.kept[p.Namespace] = ns
	}
	ns[p.UID] = true
	c.unhold(p.UID)
	return agentPreference(p)
}

// Forget is the informer's delete handler: a deleted preference frees its place.
func (c *PreferenceCap) Forget(obj any) {
	if tomb, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	p, ok := obj.(*numav1.NumaPreference)
	if !ok || c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.release(p.Namespace, p.UID)
	c.unhold(p.UID)
}

// HeldBack says whether the cache keeps o by name only.
func HeldBack(o metav1.Object) bool {
	_, ok := o.GetAnnotations()[heldBackKey]
	return ok
}

func (c *PreferenceCap) release(namespace string, uid types.UID) {
	if ns := c.kept[namespace]; ns != nil {
		delete(ns, uid)
		if len(ns) == 0 {
			delete(c.kept, namespace)
		}
	}
}

// hold returns p's stub and counts it.
func (c *PreferenceCap) hold(p *numav1.NumaPreference, why string) *numav1.NumaPreference {
	if old, ok := c.held[p.UID]; !ok || old != why {
		if ok {
			metrics.PreferencesHeldBack.WithLabelValues(old).Dec()
		}
		c.held[p.UID] = why
		metrics.PreferencesHeldBack.WithLabelValues(why).Inc()
	}
	stub := &numav1.NumaPreference{TypeMeta: p.TypeMeta, ObjectMeta: status.Identity(&p.ObjectMeta)}
	stub.Annotations = map[string]string{heldBackKey: why}
	return stub
}

func (c *PreferenceCap) unhold(uid types.UID) {
	if why, ok := c.held[uid]; ok {
		delete(c.held, uid)
		metrics.PreferencesHeldBack.WithLabelValues(why).Dec()
	}
}

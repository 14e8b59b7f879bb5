// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package summarizer

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
	numaac "github.com/numapref/numapref/api/v1alpha1/applyconfiguration/api/v1alpha1"
	"github.com/numapref/numapref/controllers/internal/runnable"
	"github.com/numapref/numapref/controllers/internal/status"
)

// SummaryFieldManager owns the whole status of every NumaPreference: only the elected
// summarizer writes it.
const SummaryFieldManager = "numapref-summary"

// IndexReportPreference indexes NumaNodeReports by the "namespace/name" of every
// NumaPreference they have an entry for.
const IndexReportPreference = "numapref.io/preference"

// fullReports is the IndexReportPreference key of every report that left preferences out
// (omittedPreferences): it may be missing any preference's entry. No namespaced name is
// "/".
const fullReports = "/"

// SummaryOptions tunes how the summarizer coalesces its writes.
type SummaryOptions struct {
	// Quiet: a burst of report changes is written once no report of the preference has
	// changed for this long (default 1s) ...
	Quiet time.Duration
	// MaxDelay: ... or once this long has passed since its first change (default 5s).
	MaxDelay time.Duration
	// MinInterval is the least time between two writes of one preference (default 2s).
	MinInterval time.Duration
	// PerNode raises MinInterval and MaxDelay to this much per NumaNodeReport (one per
	// agent), default 10ms. Every status write reaches every agent, since they all watch
	// NumaPreferences: without it a burst longer than MaxDelay costs a write per MaxDelay,
	// each sent to N agents, and the bytes per node change grow with N. With it a
	// preference's status sends agents at most its size per PerNode: 2s up to 200 nodes,
	// 10s at 1,000, 50s at 5,000. A spec change waits MinInterval only.
	PerNode time.Duration
	// MaxPerNamespace is how many NumaPreferences of one namespace are applied, the oldest
	// first (status.CompareAge); the others get Ready False with reason TooManyPreferences,
	// which makes every agent keep only their names. 0: no cap. The agents must be given the
	// same (their PreferenceCap).
	MaxPerNamespace int
	Clock           clock.PassiveClock
}

func (o *SummaryOptions) defaults() {
	if o.Quiet <= 0 {
		o.Quiet = time.Second
	}
	if o.MaxDelay <= 0 {
		o.MaxDelay = 5 * time.Second
	}
	if o.MinInterval <= 0 {
		o.MinInterval = 2 * time.Second
	}
	if o.PerNode <= 0 {
		o.PerNode = 10 * time.Millisecond
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
}

// SummaryReconciler adds up the NumaNodeReports of a NumaPreference into its status:
// summary, conditions and the few nodes with problems. Exactly one instance runs (leader
// election), and it writes each preference at most once per few seconds however many
// nodes change at once, so a rollout's writes do not grow with the cluster.
type SummaryReconciler struct {
	client client.Client
	opts   SummaryOptions

	mu      sync.Mutex
	pending map[types.NamespacedName]burst // report changes not written yet
	written map[types.NamespacedName]time.Time
	reports int // NumaNodeReports in the cache: the agents a status write reaches

	ages *ageIndex // each namespace's preferences by age, for the cap
}

// burst is when the unwritten report changes of one preference began and last came.
type burst struct{ first, last time.Time }

var _ reconcile.Reconciler = (*SummaryReconciler)(nil)

// NewSummaryReconciler makes a SummaryReconciler that reads reports and preferences
// through c.
func NewSummaryReconciler(c client.Client, opts SummaryOptions) *SummaryReconciler {
	opts.defaults()
	return &SummaryReconciler{client: c, opts: opts,
		pending: map[types.NamespacedName]burst{}, written: map[types.NamespacedName]time.Time{}, ages: newAgeIndex()}
}

// The summarizer's rights, and only its: the chart and config/rbac/summarizer give them to
// the summarizer's ServiceAccount alone (make generate writes its ClusterRole from these
// markers and the signer's, controllers/agentcert), so no agent can write a preference's
// status. Its lease and the leader election's Events are in its namespace (the chart's
// leader-election Role).
// +kubebuilder:rbac:groups=numa.numapref.io,resources=numapreferences,verbs=get;list;watch
// +kubebuilder:rbac:groups=numa.numapref.io,resources=numapreferences/status,verbs=patch
// +kubebuilder:rbac:groups=numa.numapref.io,resources=numanodereports,verbs=get;list;watch

// Reconcile recomputes the status of one NumaPreference and writes it when it changed and
// the burst of changes behind it has settled.
func (r *SummaryReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	var pref numav1.NumaPreference
	if err := r.client.Get(ctx, req.NamespacedName, &pref); err != nil {
		r.forget(req.NamespacedName)
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	want, refused, err := r.statusOf(ctx, &pref)
	if err != nil {
		return reconcile.Result{}, err
	}
	if equality.Semantic.DeepEqual(want, pref.Status) {
		r.settled(req.NamespacedName, false)
		return reconcile.Result{}, nil
	}
	if wait := r.wait(req.NamespacedName, pref.Status.ObservedGeneration != pref.Generation); wait > 0 {
		return reconcile.Result{RequeueAfter: wait}, nil
	}
	if err := r.apply(ctx, &pref, want); err != nil {
		return reconcile.Result{}, err
	}
	r.settled(req.NamespacedName, true)
	ctrl.LoggerFrom(ctx).V(2).Info("Updated summary", "nodes", want.Summary.Nodes, "pods", want.Summary.Pods, "tasks", want.Summary.Tasks)
	logRefused(ctrl.LoggerFrom(ctx), refused)
	return reconcile.Result{}, nil
}

// statusOf is the status pref should have: past its namespace's cap, the cap's verdict
// (overCapStatus); otherwise its reports' summary.
func (r *SummaryReconciler) statusOf(ctx context.Context, pref *numav1.NumaPreference) (numav1.NumaPreferenceStatus, []refusal, error) {
	if over, total := r.overCap(pref); over {
		return overCapStatus(pref, total, r.opts.MaxPerNamespace), nil, nil
	}
	reports, err := r.reportsOf(ctx, client.ObjectKeyFromObject(pref))
	if err != nil {
		return numav1.NumaPreferenceStatus{}, nil, err
	}
	want, refused := summarize(pref, reports)
	return want, refused, nil
}

// reportsOf lists the reports with an entry for preference key, and those that may have
// left it out.
func (r *SummaryReconciler) reportsOf(ctx context.Context, key types.NamespacedName) ([]numav1.NumaNodeReport, error) {
	var out []numav1.NumaNodeReport
	seen := map[string]bool{}
	for _, k := range []string{key.String(), fullReports} {
		var reports numav1.NumaNodeReportList
		if err := r.client.List(ctx, &reports, client.MatchingFields{IndexReportPreference: k}); err != nil {
			return nil, fmt.Errorf("listing the reports of %s: %w", key, err)
		}
		for _, rep := range reports.Items {
			if !seen[rep.Name] {
				seen[rep.Name] = true
				out = append(out, rep)
			}
		}
	}
	return out, nil
}

// changed notes that a report entry of the preference changed, and says whether it starts
// a burst.
func (r *SummaryReconciler) changed(key types.NamespacedName) bool {
	now := r.opts.Clock.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	b, ok := r.pending[key]
	if !ok {
		b.first = now
	}
	b.last = now
	r.pending[key] = b
	return !ok
}

// wait says how long to hold a write of key back: until MinInterval has passed since the
// last write, and the burst of report changes has been quiet for Quiet or has lasted
// MaxDelay, both at least PerNode per report. A spec change (new generation) is written
// without waiting for its burst, after MinInterval.
func (r *SummaryReconciler) wait(key types.NamespacedName, newGeneration bool) time.Duration {
	now := r.opts.Clock.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	if newGeneration {
		return r.opts.MinInterval - now.Sub(r.written[key])
	}
	spread := time.Duration(r.reports) * r.opts.PerNode
	wait := max(r.opts.MinInterval, spread) - now.Sub(r.written[key])
	if b, ok := r.pending[key]; ok {
		burst := min(r.opts.Quiet-now.Sub(b.last), max(r.opts.MaxDelay, spread)-now.Sub(b.first))
		wait = max(wait, burst)
	}
	return wait
}

// counted notes that a report came (+1) or went (-1).
func (r *SummaryReconciler) counted(delta int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reports += delta
}

// settled clears key's burst once its status is what the reports say.
func (r *SummaryReconciler) settled(key types.NamespacedName, wrote bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.pending, key)
	if wrote {
		r.written[key] = r.opts.Clock.Now()
	}
}

func (r *SummaryReconciler) forget(key types.NamespacedName) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.pending, key)
	delete(r.written, key)
}

// apply writes the status the summarizer owns: all of it.
func (r *SummaryReconciler) apply(ctx context.Context, pref *numav1.NumaPreference, st numav1.NumaPreferenceStatus) error {
	applied, err := status.ApplyConfigOf[numaac.NumaPreferenceStatusApplyConfiguration](st)
	if err != nil {
		return err
	}
	// Conditions keep their transition times: the generic conversion drops nothing, but
	// spell them out so a zero time is never sent.
	applied.Conditions = nil
	for _, c := range st.Conditions {
		applied.WithConditions(metav1ac.Condition().
			WithType(c.Type).WithStatus(c.Status).WithReason(c.Reason).WithMessage(c.Message).
			WithObservedGeneration(c.ObservedGeneration).WithLastTransitionTime(c.LastTransitionTime))
	}
	ac := numaac.NumaPreference(pref.Name, pref.Namespace).WithStatus(applied)
	err = r.client.Status().Apply(ctx, ac, client.FieldOwner(SummaryFieldManager), client.ForceOwnership)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("applying the status of NumaPreference %s/%s: %w", pref.Namespace, pref.Name, err)
	}
	return nil
}

// summarizerCacheOptions is what the summarizer's cache keeps: of a NumaPreference only
// what the summary reads (summarizerPreference), so a tenant's objects cost the summarizer
// little however large they are; of every object, no managedFields.
func summarizerCacheOptions() cache.Options {
	return cache.Options{
		DefaultTransform: cache.TransformStripManagedFields(),
		ByObject:         map[client.Object]cache.ByObject{&numav1.NumaPreference{}: {Transform: summarizerPreference}},
	}
}

// SetupSummary registers the summarizer. It runs only in the elected replica, with a cache of
// its own that holds every NumaNodeReport: the other agents never receive them.
func SetupSummary(mgr ctrl.Manager, opts SummaryOptions) error {
	cl, err := cluster.New(mgr.GetConfig(), func(o *cluster.Options) {
		o.Scheme = mgr.GetScheme()
		o.Cache = summarizerCacheOptions()
		// The manager's mapper: the agent's (controllers/agent's NodeRESTMapper) maps
		// reports without asking the API, so the index below is made while the API is
		// unreachable too.
		o.MapperProvider = func(*rest.Config, *http.Client) (meta.RESTMapper, error) { return mgr.GetRESTMapper(), nil }
	})
	if err != nil {
		return fmt.Errorf("creating the summarizer's cache: %w", err)
	}
	if err := cl.GetFieldIndexer().IndexField(context.Background(), &numav1.NumaNodeReport{}, IndexReportPreference, reportPreferenceKeys); err != nil {
		return fmt.Errorf("indexing reports by preference: %w", err)
	}
	if err := mgr.Add(runnable.LeaderOnly(cl.Start)); err != nil {
		return fmt.Errorf("adding the summarizer's cache: %w", err)
	}
	r := NewSummaryReconciler(cl.GetClient(), opts)
	err = ctrl.NewControllerManagedBy(mgr).
		Named("summary").
		WithOptions(controller.Options{CacheSyncTimeout: runnable.CacheSyncPatience}).
		WatchesRawSource(source.Kind(cl.GetCache(), &numav1.NumaPreference{}, r.preferenceHandler())).
		WatchesRawSource(source.Kind(cl.GetCache(), &numav1.NumaNodeReport{}, r.reportHandler())).
		Complete(r)
	if err != nil {
		return fmt.Errorf("setting up the summary controller: %w", err)
	}
	return nil
}

// reportHandler enqueues the preferences a report change touches: those whose entry
// appeared, went or changed, and notes the change for coalescing. The first change of a
// burst is reconciled at once; later ones only Quiet later, so a burst of thousands of
// report writes costs a few reconciles, not thousands.
func (r *SummaryReconciler) reportHandler() handler.TypedEventHandler[*numav1.NumaNodeReport, reconcile.Request] {
	enqueue := func(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request], old, cur *numav1.NumaNodeReport) {
		keys := changedEntries(old, cur)
		maps.Copy(keys, r.omissionsChanged(ctx, old, cur))
		for key := range keys {
			req := reconcile.Request{NamespacedName: key}
			if r.changed(key) {
				q.Add(req)
			} else {
				q.AddAfter(req, r.opts.Quiet) // a waiting earlier time is kept
			}
		}
	}
	return handler.TypedFuncs[*numav1.NumaNodeReport, reconcile.Request]{
		CreateFunc: func(ctx context.Context, e event.TypedCreateEvent[*numav1.NumaNodeReport], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			r.counted(1)
			enqueue(ctx, q, nil, e.Object)
		},
		UpdateFunc: func(ctx context.Context, e event.TypedUpdateEvent[*numav1.NumaNodeReport], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueue(ctx, q, e.ObjectOld, e.ObjectNew)
		},
		DeleteFunc: func(ctx context.Context, e event.TypedDeleteEvent[*numav1.NumaNodeReport], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			r.counted(-1)
			enqueue(ctx, q, e.Object, nil)
		},
	}
}

// omissionsChanged returns the preferences that one version of a report may have left
// out and the other not (mayHaveOmitted): their summary changes although no entry of
// theirs did. Only reports that leave preferences out cost a list of the preferences.
func (r *SummaryReconciler) omissionsChanged(ctx context.Context, old, cur *numav1.NumaNodeReport) map[types.NamespacedName]bool {
	omits := func(rep *numav1.NumaNodeReport, p *numav1.NumaPreference) bool {
		return rep != nil && mayHaveOmitted(rep, p.Namespace, p.Name)
	}
	if (old == nil || old.Status.OmittedPreferences <= 0) && (cur == nil || cur.Status.OmittedPreferences <= 0) {
		return nil
	}
	var prefs numav1.NumaPreferenceList
	if err := r.client.List(ctx, &prefs); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing the preferences a full report may have left out; they are summarized on their next change")
		return nil
	}
	out := map[types.NamespacedName]bool{}
	for i := range prefs.Items {
		p := &prefs.Items[i]
		if omits(old, p) != omits(cur, p) {
			out[types.NamespacedName{Namespace: p.Namespace, Name: p.Name}] = true
		}
	}
	return out
}

// changedEntries returns the preferences whose entry differs between two versions of a
// report (nil for none).
func changedEntries(old, cur *numav1.NumaNodeReport) map[types.NamespacedName]bool {
	entries := func(rep *numav1.NumaNodeReport) map[types.NamespacedName]numav1.PreferenceReport {
		m := map[types.NamespacedName]numav1.PreferenceReport{}
		if rep != nil {
			for _, e := range rep.Status.Preferences {
				m[types.NamespacedName{Namespace: e.Namespace, Name: e.Name}] = e
			}
		}
		return m
	}
	a, b := entries(old), entries(cur)
	out := map[types.NamespacedName]bool{}
	for k, e := range a {
		if f, ok := b[k]; !ok || !equality.Semantic.DeepEqual(e, f) {
			out[k] = true
		}
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			out[k] = true
		}
	}
	// The balancing fact changes every entry's effect, the restriction verdict every
	// preference's NodeRestricted condition.
	if old != nil && cur != nil && (old.Status.NumaBalancing != cur.Status.NumaBalancing || restrictionMissing(old) != restrictionMissing(cur)) {
		for k := range b {
			out[k] = true
		}
	}
	return out
}

func reportPreferenceKeys(o client.Object) []string {
	rep, ok := o.(*numav1.NumaNodeReport)
	if !ok {
		return nil
	}
	keys := make([]string, 0, len(rep.Status.Preferences)+1)
	for _, e := range rep.Status.Preferences {
		keys = append(keys, e.Namespace+"/"+e.Name)
	}
	if rep.Status.OmittedPreferences > 0 {
		keys = append(keys, fullReports)
	}
	return keys
}

// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/numapref/numapref/controllers/internal/runnable"
)

// Uninstalling numapref must leave no forced value behind. The agent watches its own
// DaemonSet, through a cache that holds that one object. When the DaemonSet is deleted
// (helm uninstall, kubectl delete -k: both delete it before the agents' RBAC and
// ServiceAccount, and an established watch still delivers the deletion), the agent
// drains: the engine undoes every value its ledger records, the agent removes its state
// from the host and then idles until it is stopped. A rolling update (the DaemonSet is
// updated, not deleted) and a plain restart (the pod is deleted) never drain. SECURITY.md
// says why this and not a pre-delete hook.

// drainer is what draining needs of the engine: from its call on, the engine places
// nothing; it undoes every ledger entry and returns how many containers' entries remain.
type drainer interface{ Drain() int }

// DrainOptions configure the drain of an agent.
type DrainOptions struct {
	// Pod is the agent's own pod (downward API: POD_NAME, POD_NAMESPACE). Its controller
	// owner reference names the DaemonSet that is watched.
	Pod types.NamespacedName
	// Node is the agent's node, whose report gets the drain's outcome (ConditionDrained),
	// which an uninstall waits for; empty: none is written.
	Node string
	// Drained is called once a drain left no ledger entry: the agent removes its state.
	Drained func()
	// Retry is how often the owner is looked up again while the API does not answer, and
	// a drain that left entries is tried again (default 5 s).
	Retry time.Duration
	// LastWords bounds the look at the DaemonSet when the agent is stopped before it saw
	// the deletion (default 3 s).
	LastWords time.Duration
}

// SetupDrain adds the drain watch to mgr. It needs get on the agent's pod and get, list and
// watch on DaemonSets in its namespace.
func SetupDrain(mgr ctrl.Manager, engine drainer, opts DrainOptions) error {
	if err := mgr.Add(runnable.NodeLocal(newDrainWatch(mgr, engine, opts).run)); err != nil {
		return fmt.Errorf("adding the drain watch: %w", err)
	}
	return nil
}

func newDrainWatch(mgr ctrl.Manager, engine drainer, opts DrainOptions) *drainWatch {
	if opts.Retry <= 0 {
		opts.Retry = 5 * time.Second
	}
	if opts.LastWords <= 0 {
		opts.LastWords = 3 * time.Second
	}
	return &drainWatch{mgr: mgr, engine: engine, opts: opts, gone: make(chan string, 1)}
}

// +kubebuilder:rbac:groups=apps,resources=daemonsets,verbs=get;list;watch,namespace=numapref-system

// drainWatch watches the agent's DaemonSet and drains when it goes.
type drainWatch struct {
	mgr    ctrl.Manager
	engine drainer
	opts   DrainOptions
	owner  metav1.OwnerReference
	// gone receives why the DaemonSet is gone; orphaned is set when it is deleted with
	// its pods orphaned (they keep running: nothing to drain).
	gone     chan string
	orphaned atomic.Bool
	// seen is the resourceVersion of the DaemonSet the watch last saw (tests wait on it).
	seen atomic.Value
	// drains counts the engine's drains.
	drains atomic.Int32
}

// run finds the DaemonSet, watches it, and drains when it goes; stopped before, it looks
// at the DaemonSet once more, since a deletion may be why it is stopped.
func (w *drainWatch) run(ctx context.Context) error {
	log := ctrl.Log.WithName("drain").WithValues("pod", klog.KRef(w.opts.Pod.Namespace, w.opts.Pod.Name))
	owner, err := w.findOwner(ctx)
	if err != nil || owner == nil {
		if err == nil {
			log.Info("The agent's pod has no DaemonSet owner: it never drains")
		}
		return nil // stopped before the API answered
	}
	w.owner = *owner
	log = log.WithValues("daemonSet", klog.KRef(w.opts.Pod.Namespace, owner.Name))
	if err := w.clearDrain(ctx); err != nil {
		log.V(1).Info("Taking away an earlier drain's condition", "error", err.Error())
	}
	if err := w.watch(ctx); err != nil {
		return err
	}
	var why string
	select {
	case why = <-w.gone:
	case <-ctx.Done():
		if why = w.lastLook(); why == "" {
			return nil
		}
	}
	log.Info("The agent's DaemonSet is gone: undoing every preferred node this agent set", "why", why)
	w.drain(ctx, log)
	<-ctx.Done()
	return nil
}

// findOwner reads the agent's pod until the API answers, and returns its DaemonSet owner
// (nil if it has none, or ctx ended first).
func (w *drainWatch) findOwner(ctx context.Context) (*metav1.OwnerReference, error) {
	var pod corev1.Pod
	for {
		err := w.mgr.GetAPIReader().Get(ctx, w.opts.Pod, &pod)
		if err == nil {
			break
		}
		ctrl.Log.WithName("drain").V(2).Info("Reading the agent's own pod", "error", err.Error())
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(w.opts.Retry):
		}
	}
	owner := metav1.GetControllerOf(&pod)
	if owner == nil || owner.Kind != "DaemonSet" {
		return nil, nil
	}
	return owner, nil
}

// watch starts a cache of the one DaemonSet and reports its deletion on w.gone. After the
// cache synced, a DaemonSet that is not there, or is another one of the same name, was
// deleted while the agent did not watch.
func (w *drainWatch) watch(ctx context.Context) error {
	c, err := cache.New(w.mgr.GetConfig(), cache.Options{
		Scheme: w.mgr.GetScheme(), HTTPClient: w.mgr.GetHTTPClient(),
		DefaultNamespaces: map[string]cache.Config{w.opts.Pod.Namespace: {}},
		ByObject: map[client.Object]cache.ByObject{
			&appsv1.DaemonSet{}: {Field: fields.OneTermEqualSelector("metadata.name", w.owner.Name)},
		},
	})
	if err != nil {
		return fmt.Errorf("making the cache of the agent's DaemonSet: %w", err)
	}
	inf, err := c.GetInformer(ctx, &appsv1.DaemonSet{})
	if err != nil {
		return fmt.Errorf("watching the agent's DaemonSet: %w", err)
	}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { w.observe(obj, false) },
		UpdateFunc: func(_, obj any) { w.observe(obj, false) },
		DeleteFunc: func(obj any) { w.observe(obj, true) },
	}); err != nil {
		return fmt.Errorf("watching the agent's DaemonSet: %w", err)
	}
	go func() {
		if err := c.Start(ctx); err != nil {
			ctrl.Log.WithName("drain").Error(err, "Watching the agent's DaemonSet")
		}
	}()
	go func() {
		if !c.WaitForCacheSync(ctx) {
			return
		}
		var ds appsv1.DaemonSet
		err := c.Get(ctx, client.ObjectKey{Namespace: w.opts.Pod.Namespace, Name: w.owner.Name}, &ds)
		if apierrors.IsNotFound(err) {
			w.report("not found")
		}
	}()
	return nil
}

// observe takes an event of the watch.
func (w *drainWatch) observe(obj any, deleted bool) {
	if tomb, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	ds, ok := obj.(*appsv1.DaemonSet)
	if !ok {
		if deleted {
			w.report("deleted")
		}
		return
	}
	w.seen.Store(ds.ResourceVersion)
	if why := goneWhy(ds, w.owner.UID, deleted, &w.orphaned); why != "" {
		w.report(why)
	}
}

// goneWhy says why ds (the watch's view, deleted if its deletion was delivered) means the
// DaemonSet owning the agent is gone, or "" if it is not. A deletion that orphans the pods
// (they keep running, and a new DaemonSet may adopt them) sets orphaned and never drains.
func goneWhy(ds *appsv1.DaemonSet, owner types.UID, deleted bool, orphaned *atomic.Bool) string {
	if ds.DeletionTimestamp != nil && slices.Contains(ds.Finalizers, metav1.FinalizerOrphanDependents) {
		orphaned.Store(true)
	}
	switch {
	case ds.UID != owner:
		return "replaced by another DaemonSet of the same name"
	case orphaned.Load():
		return ""
	case deleted:
		return "deleted"
	case ds.DeletionTimestamp != nil:
		return "being deleted"
	}
	return ""
}

func (w *drainWatch) report(why string) {
	select {
	case w.gone <- why:
	default:
	}
}

// lastLook asks the API, once and briefly, whether the DaemonSet is gone, when the agent is
// stopped before its watch said so. An error (the API unreachable, the RBAC already
// deleted) says nothing: a plain restart must never drain.
func (w *drainWatch) lastLook() string {
	select {
	case why := <-w.gone:
		return why
	default:
	}
	ctx, cancel := context.WithTimeout(context.Background(), w.opts.LastWords)
	defer cancel()
	var ds appsv1.DaemonSet
	err := w.mgr.GetAPIReader().Get(ctx, client.ObjectKey{Namespace: w.opts.Pod.Namespace, Name: w.owner.Name}, &ds)
	switch {
	case apierrors.IsNotFound(err):
		return "not found when the agent was stopped"
	case err != nil:
		return ""
	}
	return goneWhy(&ds, w.owner.UID, false, &w.orphaned)
}

// drain has the engine undo everything, again while entries remain, until none does or ctx
// ends; then it calls Drained.
func (w *drainWatch) drain(ctx context.Context, log logr.Logger) {
	for {
		w.drains.Add(1)
		remaining := w.engine.Drain()
		// The drain is reported even when ctx has ended: a drain that SIGTERM interrupted
		// is the common case, and the uninstall waits for its word.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), w.opts.LastWords)
		if err := w.reportDrain(rctx, remaining); err != nil {
			log.Error(err, "Reporting the drain")
		}
		cancel()
		if remaining == 0 {
			break
		}
		log.Error(errors.New("entries remain"), "Drained, but some values could not be put back; trying again", "containers", remaining)
		select {
		case <-ctx.Done():
			log.Info("Stopped with ledger entries left: the state dir is kept for the next agent", "containers", remaining)
			return
		case <-time.After(w.opts.Retry):
		}
	}
	if w.opts.Drained != nil {
		w.opts.Drained()
	}
	log.Info("Drained: every value this agent set is put back; idle until stopped")
}

// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
	"github.com/numapref/numapref/controllers/internal/runnable"
)

// Engine is what the node agent controller needs of the apply engine.
type Engine interface {
	desiredStateSink
	Changes() <-chan struct{}
}

// SetupNodeAgent registers the node agent's controller for nodeName with mgr. Its cache
// must hold only this node's pods and report (see NodeCacheOptions). The controller runs
// on every agent, without leader election.
func SetupNodeAgent(mgr ctrl.Manager, nodeName string, engine Engine, opts NodeAgentOptions) error {
	r := NewNodeAgentReconciler(mgr.GetClient(), mgr.GetAPIReader(), nodeName, engine, mgr.GetEventRecorder("numapref-agent"), opts)
	nodeKey := []reconcile.Request{{NamespacedName: types.NamespacedName{Name: nodeName}}}
	toNode := handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request { return nodeKey })

	changes := make(chan event.GenericEvent)
	if err := mgr.Add(forwardChanges(engine.Changes(), changes, nodeName)); err != nil {
		return fmt.Errorf("adding engine change forwarder: %w", err)
	}
	if opts.NRI != nil {
		if err := mgr.Add(forwardChanges(opts.NRI.Changes(), changes, nodeName)); err != nil {
			return fmt.Errorf("adding NRI change forwarder: %w", err)
		}
	}
	if err := forgetDeletedPreferences(mgr, opts.PreferenceCap); err != nil {
		return err
	}
	if opts.NodeRestrictionCheck > 0 {
		check := newRestrictionCheck(mgr.GetClient(), nodeName, opts.NodeRestrictionCheck, changes)
		if err := mgr.Add(check); err != nil {
			return fmt.Errorf("adding the node restriction check: %w", err)
		}
		r.restriction = check.Verdict
	}
	err := ctrl.NewControllerManagedBy(mgr).
		Named("nodeagent").
		WithOptions(controller.Options{
			NeedLeaderElection: ptr.To(false), MaxConcurrentReconciles: 1,
			// Started while the API is unreachable, the controller waits for its caches as
			// long as it takes instead of failing the manager, and with it the engine, after
			// controller-runtime's default of 2 minutes.
			CacheSyncTimeout: runnable.CacheSyncPatience,
			// One key for the whole node: after an apiserver outage its status must catch up
			// within seconds, not after the default limiter's backoff of up to 16 minutes.
			RateLimiter: workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](5*time.Millisecond, maxStatusRetryDelay),
		}).
		Watches(&corev1.Pod{}, toNode).
		Watches(&numav1.NumaPreference{}, toNode, builder.WithPredicates(specChanged())).
		Watches(&numav1.NumaNodeReport{}, toNode).
		WatchesRawSource(source.Channel(changes, toNode)).
		Complete(r)
	if err != nil {
		return fmt.Errorf("setting up the node agent controller: %w", err)
	}
	return nil
}

// NodeCacheOptions scopes an agent's cache to what its node needs: its own pods and its own
// NumaNodeReport, never other nodes'. NumaPreferences stay cached cluster-wide: their specs
// decide which pods are selected, and only the summarizer writes their status, coalesced.
// Of a NumaPreference the cache keeps only what the agent reads (agentPreference), and of
// a namespace past its cap only names (capped; nil keeps every one whole). Give the same
// capped to SetupNodeAgent (NodeAgentOptions.PreferenceCap), which frees a deleted one's
// place.
func NodeCacheOptions(node string, capped *PreferenceCap) cache.Options {
	return cache.Options{
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Pod{}:            {Field: fields.OneTermEqualSelector("spec.nodeName", node)},
			&numav1.NumaNodeReport{}: {Field: fields.OneTermEqualSelector("metadata.name", node)},
			&numav1.NumaPreference{}: {Transform: capped.Transform},
		},
		// Nothing reads managedFields from the cache (everything is server-side applied);
		// dropping them keeps the agent's memory small.
		DefaultTransform: cache.TransformStripManagedFields(),
	}
}

// maxStatusRetryDelay bounds the node agent controller's backoff after failures.
const maxStatusRetryDelay = 10 * time.Second

// specChanged passes the NumaPreference events this node must react to: spec and lifecycle
// changes, and a preference held back by the cache or taken whole (PreferenceCap). Other
// status writes (the summarizer's) change none of them.
func specChanged() predicate.Predicate {
	return predicate.Or(predicate.GenerationChangedPredicate{}, predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			return !e.ObjectOld.GetDeletionTimestamp().Equal(e.ObjectNew.GetDeletionTimestamp()) ||
				HeldBack(e.ObjectOld) != HeldBack(e.ObjectNew)
		},
	})
}

// forgetDeletedPreferences has capped free a deleted preference's place in its namespace.
// The handler is added once the manager runs, not here: an informer asked for before the
// cache starts is one the manager waits to sync before it starts anything else, and an
// agent started while the API is unreachable must place from its persisted state at once.
func forgetDeletedPreferences(mgr ctrl.Manager, capped *PreferenceCap) error {
	if capped == nil {
		return nil
	}
	return mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		inf, err := mgr.GetCache().GetInformer(ctx, &numav1.NumaPreference{}, cache.BlockUntilSynced(false))
		if err != nil {
			return fmt.Errorf("getting the NumaPreference informer: %w", err)
		}
		if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{DeleteFunc: capped.Forget}); err != nil {
			return fmt.Errorf("watching deleted NumaPreferences: %w", err)
		}
		return nil
	}))
}

// forwardChanges turns the engine's change signals into controller events, after one at
// start: the node's labels and report are written even where no pod is selected.
func forwardChanges(from <-chan struct{}, to chan<- event.GenericEvent, nodeName string) manager.Runnable {
	return runnable.NodeLocal(func(ctx context.Context) error {
		node := &corev1.Node{}
		node.Name = nodeName
		for {
			select {
			case to <- event.GenericEvent{Object: node}:
			case <-ctx.Done():
				return nil
			}
			select {
			case <-from:
			case <-ctx.Done():
				return nil
			}
		}
	})
}

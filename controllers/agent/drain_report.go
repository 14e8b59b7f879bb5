// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
	numaac "github.com/numapref/numapref/api/v1alpha1/applyconfiguration/api/v1alpha1"
)

// DrainFieldManager owns the Drained condition of a node's report: the drain writes it
// apart from the reconciler's report, which goes on without it.
func DrainFieldManager(node string) string { return "numapref-agent-drain/" + node }

// DrainedMessage is how the Drained condition names the DaemonSet whose deletion it
// answers: an uninstall check reads only its own DaemonSet's.
func DrainedMessage(what string, daemonSet metav1.OwnerReference) string {
	return fmt.Sprintf("%s (DaemonSet %s, UID %s)", what, daemonSet.Name, daemonSet.UID)
}

// reportDrain writes the drain's outcome into the node's report: Drained True, or False
// with how many containers' values remain.
func (w *drainWatch) reportDrain(ctx context.Context, remaining int) error {
	cond := metav1ac.Condition().WithType(numav1.ConditionDrained).WithLastTransitionTime(metav1.Now())
	if remaining == 0 {
		cond.WithStatus(metav1.ConditionTrue).WithReason(numav1.ReasonDrained).
			WithMessage(DrainedMessage("every value this agent set is put back", w.owner))
	} else {
		cond.WithStatus(metav1.ConditionFalse).WithReason(numav1.ReasonUndoIncomplete).
			WithMessage(DrainedMessage(fmt.Sprintf("the values of %d containers could not be put back; the state dir stays for a later agent", remaining), w.owner))
	}
	return w.applyDrain(ctx, numaac.NumaNodeReportStatus().WithConditions(cond))
}

// clearDrain takes away a Drained condition an earlier agent of the node left: an apply
// of no status gives up every field of it the drain's field manager owned.
func (w *drainWatch) clearDrain(ctx context.Context) error {
	return w.applyDrain(ctx, nil)
}

// applyDrain applies st (nil: none) under the drain's field manager, the report owned by
// the Node as the reconciler writes it.
func (w *drainWatch) applyDrain(ctx context.Context, st *numaac.NumaNodeReportStatusApplyConfiguration) error {
	if w.opts.Node == "" {
		return nil
	}
	var node corev1.Node
	if err := w.mgr.GetAPIReader().Get(ctx, client.ObjectKey{Name: w.opts.Node}, &node); err != nil {
		return fmt.Errorf("reading Node %s: %w", w.opts.Node, err)
	}
	ac := numaac.NumaNodeReport(w.opts.Node).
		WithOwnerReferences(metav1ac.OwnerReference().WithAPIVersion("v1").WithKind("Node").WithName(node.Name).WithUID(node.UID))
	if st != nil {
		ac.WithStatus(st)
	}
	if err := w.mgr.GetClient().Apply(ctx, ac, client.FieldOwner(DrainFieldManager(w.opts.Node)), client.ForceOwnership); err != nil {
		return fmt.Errorf("writing the drain's outcome into the report of node %s: %w", w.opts.Node, err)
	}
	return nil
}

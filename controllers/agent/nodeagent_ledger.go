// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
)

// warnLedgerDamaged gives the Node one Warning Event when the agent found its ledger
// damaged at start: the values it recorded before are lost, and an operator must know
// that they may never be undone. Until the Node can be read, it tries again on the next
// reconcile.
func (r *NodeAgentReconciler) warnLedgerDamaged(ctx context.Context) {
	if r.opts.LedgerDamaged == nil || r.ledgerWarned {
		return
	}
	var node corev1.Node
	if err := r.reader.Get(ctx, client.ObjectKey{Name: r.nodeName}, &node); err != nil {
		ctrl.LoggerFrom(ctx).V(2).Info("Reading the Node for its LedgerDamaged Event", "error", err.Error())
		return
	}
	r.recorder.Eventf(&node, nil, corev1.EventTypeWarning, numav1.ReasonLedgerDamaged, "LoadLedger",
		"the numapref agent found its ledger damaged at start, and started from an empty one: values it set before may "+
			"never be undone (%v)", r.opts.LedgerDamaged)
	r.ledgerWarned = true
}

// ledgerDamagedCount is the report's count of damaged ledgers.
func ledgerDamagedCount(err error) int32 {
	if err == nil {
		return 0
	}
	return 1
}

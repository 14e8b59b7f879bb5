// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
	numaac "github.com/numapref/numapref/api/v1alpha1/applyconfiguration/api/v1alpha1"
	"github.com/numapref/numapref/controllers/internal/status"
	"github.com/numapref/numapref/internal/metrics"
	"github.com/numapref/numapref/internal/nodeagent"
	"github.com/numapref/numapref/internal/nodeagent/cgroups"
	"github.com/numapref/numapref/internal/nodeagent/desire"
	"github.com/numapref/numapref/internal/nodeagent/plan"
)

// report writes the node's NumaNodeReport when it differs from the cached one, at most once
// per ReportInterval. A write that fails is retried with backoff: the engine keeps
// enforcing whatever the API does.
func (r *NodeAgentReconciler) report(ctx context.Context, plans []podPlan, prefs []numav1.NumaPreference, results map[desire.ContainerKey]plan.Result, facts NodeFacts) (reconcile.Result, error) {
	want := r.reportStatus(plans, prefs, results, facts)
	var have numav1.NumaNodeReport
	err := r.client.Get(ctx, client.ObjectKey{Name: r.nodeName}, &have)
	now := r.opts.Clock.Now()
	want.Conditions = nriConditions(restrictionConditions(have.Status.Conditions, r.restrictionVerdict(), now), facts.NRI, now)
	switch {
	case err == nil && equality.Semantic.DeepEqual(want, have.Status):
		return reconcile.Result{}, nil
	case apierrors.IsNotFound(err):
		r.nodeStale = true // created anew: the Node may be new too
	case err != nil:
		return reconcile.Result{}, fmt.Errorf("reading the report of node %s: %w", r.nodeName, err)
	}
	if wait := r.opts.ReportInterval - r.opts.Clock.Since(r.lastReport); wait > 0 {
		return reconcile.Result{RequeueAfter: wait}, nil
	}
	if err := r.applyReport(ctx, want); err != nil {
		metrics.ReportWrites.WithLabelValues("error").Inc()
		return reconcile.Result{}, err
	}
	metrics.ReportWrites.WithLabelValues("ok").Inc()
	r.lastReport = r.opts.Clock.Now()
	ctrl.LoggerFrom(ctx).V(2).Info("Reported node status", "preferences", want.Totals.Preferences, "pods", want.Totals.Pods, "tasks", want.Totals.Tasks)
	return reconcile.Result{}, nil
}

// reportStatus is the report the node's state calls for.
func (r *NodeAgentReconciler) reportStatus(plans []podPlan, prefs []numav1.NumaPreference, results map[desire.ContainerKey]plan.Result, facts NodeFacts) numav1.NumaNodeReportStatus {
	pp := make([]desire.PodPlan, 0, len(plans))
	for _, p := range plans {
		pp = append(pp, p.plan)
	}
	generation := make(map[string]int64, len(prefs))
	for _, p := range prefs {
		generation[p.Namespace+"/"+p.Name] = p.Generation
	}
	st := numav1.NumaNodeReportStatus{
		KernelSupport: facts.KernelSupport, NumaBalancing: facts.NUMABalancing, NumaNodes: int32(facts.NUMANodes), NRI: facts.NRI,
		Mechanisms:    facts.Mechanisms(),
		Preferences:   nodeagent.PreferenceReports(pp, results, facts.BalancingEnabled()),
		LedgerDamaged: ledgerDamagedCount(r.opts.LedgerDamaged),
	}
	for i := range st.Preferences {
		e := &st.Preferences[i]
		e.Generation = generation[e.Namespace+"/"+e.Name]
		st.Totals.Preferences++
		st.Totals.Pods += e.Pods
		st.Totals.Tasks += e.Tasks
		for _, list := range status.ReasonLists(e) {
			for _, c := range list {
				if numav1.LookupReason(c.Reason).Problem {
					st.Totals.Problems += c.Count
				}
			}
		}
	}
	// Past the CRD's bound the whole report would be refused: it keeps what fits and counts
	// the rest (the totals above still add up every entry).
	var omitted int
	st.Preferences, omitted = nodeagent.BoundReports(st.Preferences, numav1.MaxReportPreferences)
	st.OmittedPreferences = int32(omitted)
	if len(st.Preferences) == 0 {
		st.Preferences = nil
	}
	return st
}

// applyReport server-side-applies the whole report under the agent's field manager, owned
// by the Node so that it goes when the Node goes.
func (r *NodeAgentReconciler) applyReport(ctx context.Context, st numav1.NumaNodeReportStatus) error {
	node, err := r.node(ctx, r.nodeStale)
	if err != nil {
		return err
	}
	r.nodeStale = false
	applied, err := status.ApplyConfigOf[numaac.NumaNodeReportStatusApplyConfiguration](st)
	if err != nil {
		return err
	}
	ac := numaac.NumaNodeReport(r.nodeName).WithStatus(applied).
		WithOwnerReferences(metav1ac.OwnerReference().WithAPIVersion("v1").WithKind("Node").
			WithName(node.Name).WithUID(node.UID))
	if err := r.client.Apply(ctx, ac, client.FieldOwner(AgentFieldManager(r.nodeName)), client.ForceOwnership); err != nil {
		r.nodeStale = true // perhaps a new Node: read it again next time
		return fmt.Errorf("applying the report of node %s: %w", r.nodeName, err)
	}
	return nil
}

// nriConditions sets the NRIConnected condition of conds from nri (NodeFacts.NRI), or
// removes it when the agent has no NRI plugin.
func nriConditions(conds []metav1.Condition, nri string, now time.Time) []metav1.Condition {
	if nri == "" {
		meta.RemoveStatusCondition(&conds, numav1.ConditionNRIConnected)
		return nilIfEmpty(conds)
	}
	c := metav1.Condition{Type: numav1.ConditionNRIConnected, Status: metav1.ConditionTrue, Reason: numav1.ReasonNRIConnected,
		Message: "registered with the container runtime: containers are placed at their start", LastTransitionTime: metav1.NewTime(now.Truncate(time.Second))}
	if nri != numav1.NRIConnected {
		c.Status, c.Reason = metav1.ConditionFalse, numav1.ReasonNRINotConnected
		c.Message = "not registered with the container runtime (no NRI socket, a runtime without NRI, or a lost connection): new containers are placed only after they start"
	}
	meta.SetStatusCondition(&conds, c)
	return conds
}

// node is the agent's Node as NodeAgentOptions.Node knows it, its UID read from the API
// when it has none yet, or again when refresh. The UID owns the report and tells the
// kubelet's mirror pods from pods that claim to be one; placing at start and inspect share
// it. A UID once read is kept while a refresh fails: planning goes on with it.
func (r *NodeAgentReconciler) node(ctx context.Context, refresh bool) (cgroups.Node, error) {
	if n := r.opts.Node.Node(); n.UID != "" && !refresh {
		return n, nil
	}
	var node corev1.Node
	if err := r.reader.Get(ctx, client.ObjectKey{Name: r.nodeName}, &node); err != nil {
		return cgroups.Node{}, fmt.Errorf("reading node %s: %w", r.nodeName, err)
	}
	r.opts.Node.SetUID(node.UID)
	return r.opts.Node.Node(), nil
}

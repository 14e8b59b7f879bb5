package controllers

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
	numaac "github.com/numapref/numapref/api/v1alpha1/applyconfiguration/api/v1alpha1"
)

// SummaryFieldManager owns summary, conditions and observedGeneration of every
// NumaPreference; the node agents own only their own entries of status.nodes.
const SummaryFieldManager = "numapref-summary"

// SummaryReconciler computes a NumaPreference's summary and conditions from the entries the
// node agents report. Exactly one instance runs (leader election), so nothing races on them.
type SummaryReconciler struct {
	client client.Client
}

var _ reconcile.Reconciler = (*SummaryReconciler)(nil)

// NewSummaryReconciler makes a SummaryReconciler.
func NewSummaryReconciler(c client.Client) *SummaryReconciler { return &SummaryReconciler{client: c} }

// +kubebuilder:rbac:groups=numa.numapref.io,resources=numapreferences,verbs=get;list;watch
// +kubebuilder:rbac:groups=numa.numapref.io,resources=numapreferences/status,verbs=patch

// Reconcile recomputes the summary of one NumaPreference and writes it when it changed.
func (r *SummaryReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	var pref numav1.NumaPreference
	if err := r.client.Get(ctx, req.NamespacedName, &pref); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	want := summarize(&pref)
	if equality.Semantic.DeepEqual(want, pref.Status) {
		return reconcile.Result{}, nil
	}
	if err := r.apply(ctx, &pref, want); err != nil {
		return reconcile.Result{}, err
	}
	ctrl.LoggerFrom(ctx).V(2).Info("Updated summary", "pods", want.Summary.Pods, "tasks", want.Summary.Tasks)
	return reconcile.Result{}, nil
}

// apply writes only the fields the summarizer owns.
func (r *SummaryReconciler) apply(ctx context.Context, pref *numav1.NumaPreference, st numav1.NumaPreferenceStatus) error {
	status := numaac.NumaPreferenceStatus().
		WithObservedGeneration(st.ObservedGeneration).
		WithSummary(numaac.Summary().
			WithNodes(st.Summary.Nodes).WithPods(st.Summary.Pods).
			WithContainers(st.Summary.Containers).WithTasks(st.Summary.Tasks))
	for _, c := range st.Conditions {
		status.WithConditions(metav1ac.Condition().
			WithType(c.Type).WithStatus(c.Status).WithReason(c.Reason).WithMessage(c.Message).
			WithObservedGeneration(c.ObservedGeneration).WithLastTransitionTime(c.LastTransitionTime))
	}
	ac := numaac.NumaPreference(pref.Name, pref.Namespace).WithStatus(status)
	err := r.client.Status().Apply(ctx, ac, client.FieldOwner(SummaryFieldManager), client.ForceOwnership)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("applying summary of NumaPreference %s/%s: %w", pref.Namespace, pref.Name, err)
	}
	return nil
}

// SetupSummary registers the summary controller. It runs behind the manager's leader
// election: one agent in the cluster summarizes.
func SetupSummary(mgr ctrl.Manager) error {
	err := ctrl.NewControllerManagedBy(mgr).
		Named("summary").
		For(&numav1.NumaPreference{}).
		Complete(NewSummaryReconciler(mgr.GetClient()))
	if err != nil {
		return fmt.Errorf("setting up the summary controller: %w", err)
	}
	return nil
}

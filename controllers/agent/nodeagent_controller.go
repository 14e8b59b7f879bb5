// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
	"github.com/numapref/numapref/internal/nodeagent/cgroups"
	"github.com/numapref/numapref/internal/nodeagent/desire"
	"github.com/numapref/numapref/internal/nodeagent/nri"
	"github.com/numapref/numapref/internal/nodeagent/plan"
)

// desiredStateSink takes this node's desired state and reports what was achieved.
type desiredStateSink interface {
	SetDesired([]desire.Desire)
	Results() map[desire.ContainerKey]plan.Result
}

// NodeAgentReconciler turns the pods of one node and the NumaPreferences that select them
// into the engine's desired state, and reports the engine's results as pod Events, as the
// node's NumaNodeReport and as node labels. It has one key: the node.
type NodeAgentReconciler struct {
	client   client.Client
	reader   client.Reader // uncached, for the Node's UID
	nodeName string
	engine   desiredStateSink
	recorder events.EventRecorder
	opts     NodeAgentOptions

	// nodeStale says the Node's UID (in opts.Node, which owns the report: garbage
	// collection with the Node) is read again before the next report write: a write failed
	// or the report was gone, perhaps with a new Node of the same name. lastReport is when
	// the report was last written and labels the node labels last applied.
	nodeStale  bool
	lastReport time.Time
	labels     NodeFacts

	// reported remembers the last reason per container, applied the last Applied message
	// and conflicts the last conflict message per pod, so Events fire on changes only.
	reported    map[desire.ContainerKey]string
	applied     map[types.UID]string
	conflicts   map[types.UID]string
	ineffective map[types.UID]bool
	// mirrorIgnored remembers the pods told that their mirror annotation is ignored.
	mirrorIgnored map[types.UID]bool
	// ledgerWarned is set once the Node has its LedgerDamaged Event.
	ledgerWarned bool
	// restriction is the node restriction check's last verdict (nil: no check runs);
	// restrictionWarned is set while the Node has its NodeRestrictionMissing Event.
	restriction       func() restrictionVerdict
	restrictionWarned bool
}

// NodeAgentOptions tunes the node agent controller.
type NodeAgentOptions struct {
	// Facts returns this host's kernel facts, published as node labels and in the report.
	Facts func() NodeFacts
	// ReportInterval is the least time between two writes of the node's report: a node
	// whose counts churn writes at most this often. Default 5s.
	ReportInterval time.Duration
	// Clock defaults to the real clock.
	Clock clock.PassiveClock
	// LedgerDamaged is why the engine found its ledger damaged at start (nil: intact);
	// it is reported on the Node (nodeagent_ledger.go).
	LedgerDamaged error
	// NodeRestrictionCheck is how often the agent proves that the node restriction policy
	// refuses its writes outside its own node (noderestriction.go), the first time at
	// start; 0 never checks.
	NodeRestrictionCheck time.Duration
	// NRI is the agent's NRI plugin (--nri-socket); nil when it has none. Whether it is
	// connected goes into the report (status.nri, the NRIConnected condition) and the
	// node label numapref.io/nri, updated on each change.
	NRI NRIState
	// Preferences, when set, keeps the NumaPreferences of the namespaces with pods on this
	// node on disk at each reconcile, for nri.StartPlacer in an agent restarted while the
	// API is unreachable.
	Preferences *nri.PreferenceStore
	// Node is the agent's Node as the API names it, which judges mirror pods; the
	// reconciler reads its UID before it plans and sets it here for the other readers
	// (placing at start, inspect). nil: the reconciler's own.
	Node *cgroups.NodeIdentity
	// PreferenceCap is the cache's bound on each namespace's NumaPreferences
	// (NodeCacheOptions); the controller frees a deleted preference's place in it. nil:
	// none.
	PreferenceCap *PreferenceCap
}

// NRIState is what the node agent controller reads of the NRI plugin.
type NRIState interface {
	Connected() bool
	// Changes has a value whenever Connected changed.
	Changes() <-chan struct{}
}

func (o *NodeAgentOptions) defaults() {
	if o.Facts == nil {
		o.Facts = func() NodeFacts { return NodeFacts{} }
	}
	if o.ReportInterval <= 0 {
		o.ReportInterval = 5 * time.Second
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
}

var _ reconcile.Reconciler = (*NodeAgentReconciler)(nil)

// NewNodeAgentReconciler makes the reconciler of node nodeName. c reads from the cache;
// reader reads the API directly.
func NewNodeAgentReconciler(c client.Client, reader client.Reader, nodeName string, engine desiredStateSink, recorder events.EventRecorder, opts NodeAgentOptions) *NodeAgentReconciler {
	opts.defaults()
	if opts.Node == nil {
		opts.Node = cgroups.NewNodeIdentity(nodeName)
	}
	return &NodeAgentReconciler{
		client: c, reader: reader, nodeName: nodeName, engine: engine, recorder: recorder, opts: opts,
		reported:    map[desire.ContainerKey]string{},
		applied:     map[types.UID]string{},
		conflicts:   map[types.UID]string{},
		ineffective: map[types.UID]bool{}, mirrorIgnored: map[types.UID]bool{},
	}
}

// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;patch
// +kubebuilder:rbac:groups=numa.numapref.io,resources=numapreferences,verbs=get;list;watch
// +kubebuilder:rbac:groups=numa.numapref.io,resources=numanodereports,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// The node's own serving certificate (-tls-node-certificate, agentcert.NodeCertificate):
// the agent asks for it and reads the answer; only the summarizer approves and signs. A
// role is generated from whole packages, so these rights of the requester are written here,
// with the agent's, and controllers/agentcert holds only the signer's.
// +kubebuilder:rbac:groups=certificates.k8s.io,resources=certificatesigningrequests,verbs=get;create

// Reconcile computes the node's desired state from the cache, hands it to the engine and
// reports the engine's last results.
func (r *NodeAgentReconciler) Reconcile(ctx context.Context, _ reconcile.Request) (reconcile.Result, error) {
	node, err := r.node(ctx, false)
	if err != nil {
		return reconcile.Result{}, err
	}
	pods, prefs, err := r.read(ctx)
	if err != nil {
		return reconcile.Result{}, err
	}
	plans := planPods(node, pods, prefs)
	if r.opts.Preferences != nil {
		r.opts.Preferences.Save(podNamespacePreferences(pods, prefs))
	}
	var desires []desire.Desire
	for _, p := range plans {
		desires = append(desires, p.plan.Desires...)
	}
	r.engine.SetDesired(desires)

	results := r.engine.Results()
	facts := r.opts.Facts()
	if r.opts.NRI != nil {
		facts.NRI = numav1.NRIDisconnected
		if r.opts.NRI.Connected() {
			facts.NRI = numav1.NRIConnected
		}
	}
	r.recordEvents(plans, results, facts)
	r.warnLedgerDamaged(ctx)
	r.warnRestrictionMissing(ctx, r.restrictionVerdict())
	if err := r.publishLabels(ctx, facts); err != nil {
		return reconcile.Result{}, err
	}
	return r.report(ctx, plans, prefs, results, facts)
}

type podPlan struct {
	pod  *corev1.Pod
	plan desire.PodPlan
}

// read lists this node's pods (the cache holds no others) and all NumaPreferences.
func (r *NodeAgentReconciler) read(ctx context.Context) ([]corev1.Pod, []numav1.NumaPreference, error) {
	var pods corev1.PodList
	if err := r.client.List(ctx, &pods); err != nil {
		return nil, nil, fmt.Errorf("listing pods: %w", err)
	}
	var prefs numav1.NumaPreferenceList
	if err := r.client.List(ctx, &prefs); err != nil {
		return nil, nil, fmt.Errorf("listing NumaPreferences: %w", err)
	}
	return pods.Items, prefs.Items, nil
}

// podNamespacePreferences returns the NumaPreferences of the namespaces that have pods.
func podNamespacePreferences(pods []corev1.Pod, prefs []numav1.NumaPreference) []numav1.NumaPreference {
	namespaces := map[string]bool{}
	for _, p := range pods {
		namespaces[p.Namespace] = true
	}
	var out []numav1.NumaPreference
	for _, p := range prefs {
		if namespaces[p.Namespace] {
			out = append(out, p)
		}
	}
	return out
}

func planPods(node cgroups.Node, pods []corev1.Pod, prefs []numav1.NumaPreference) []podPlan {
	byNamespace := map[string][]numav1.NumaPreference{}
	for _, p := range prefs {
		byNamespace[p.Namespace] = append(byNamespace[p.Namespace], p)
	}
	var out []podPlan
	for i := range pods {
		pod := &pods[i]
		if pod.DeletionTimestamp != nil && len(pod.Status.ContainerStatuses) == 0 {
			continue
		}
		pp := desire.PlanPod(node, pod, byNamespace[pod.Namespace])
		if len(pp.Desires) > 0 || len(pp.Selected) > 0 {
			out = append(out, podPlan{pod: pod, plan: pp})
		}
	}
	return out
}

// restrictionVerdict is the node restriction check's last verdict: Unknown when none runs
// or before its first answer.
func (r *NodeAgentReconciler) restrictionVerdict() restrictionVerdict {
	if r.restriction == nil {
		return restrictionVerdict{Status: metav1.ConditionUnknown}
	}
	return r.restriction()
}

// AgentFieldManager is the server-side-apply field manager of the agent on node.
func AgentFieldManager(node string) string { return "numapref-agent/" + node }

package controllers

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
	numaac "github.com/numapref/numapref/api/v1alpha1/applyconfiguration/api/v1alpha1"
	"github.com/numapref/numapref/internal/nodeagent"
)

// desiredStateSink takes this node's desired state and reports what was achieved.
type desiredStateSink interface {
	SetDesired([]nodeagent.Desire)
	Results() map[nodeagent.ContainerKey]nodeagent.ContainerResult
}

// NodeAgentReconciler turns the pods of one node and the NumaPreferences that select them
// into the engine's desired state, and reports the engine's results as pod Events and as
// this node's entries in NumaPreference status. It has one key: the node.
type NodeAgentReconciler struct {
	client   client.Client
	nodeName string
	engine   desiredStateSink
	recorder events.EventRecorder

	// reported remembers the last reason per container, applied the last Applied message
	// and conflicts the last conflict message per pod, so Events fire on changes only.
	reported  map[nodeagent.ContainerKey]string
	applied   map[types.UID]string
	conflicts map[types.UID]string
}

var _ reconcile.Reconciler = (*NodeAgentReconciler)(nil)

// NewNodeAgentReconciler makes the reconciler of node nodeName.
func NewNodeAgentReconciler(c client.Client, nodeName string, engine desiredStateSink, recorder events.EventRecorder) *NodeAgentReconciler {
	return &NodeAgentReconciler{
		client: c, nodeName: nodeName, engine: engine, recorder: recorder,
		reported:  map[nodeagent.ContainerKey]string{},
		applied:   map[types.UID]string{},
		conflicts: map[types.UID]string{},
	}
}

// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch
// +kubebuilder:rbac:groups=numa.numapref.io,resources=numapreferences,verbs=get;list;watch
// +kubebuilder:rbac:groups=numa.numapref.io,resources=numapreferences/status,verbs=patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile computes the node's desired state from the cache, hands it to the engine and
// reports the engine's last results.
func (r *NodeAgentReconciler) Reconcile(ctx context.Context, _ reconcile.Request) (reconcile.Result, error) {
	pods, prefs, err := r.read(ctx)
	if err != nil {
		return reconcile.Result{}, err
	}
	plans := planPods(pods, prefs)
	var desires []nodeagent.Desire
	for _, p := range plans {
		desires = append(desires, p.plan.Desires...)
	}
	r.engine.SetDesired(desires)

	results := r.engine.Results()
	r.recordEvents(plans, results)
	return reconcile.Result{}, r.reportStatus(ctx, plans, prefs, results)
}

type podPlan struct {
	pod  *corev1.Pod
	plan nodeagent.PodPlan
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

func planPods(pods []corev1.Pod, prefs []numav1.NumaPreference) []podPlan {
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
		plan := nodeagent.PlanPod(pod, byNamespace[pod.Namespace])
		if len(plan.Desires) > 0 || len(plan.Selected) > 0 {
			out = append(out, podPlan{pod: pod, plan: plan})
		}
	}
	return out
}

// recordEvents emits pod Events when something a user acts on changes, never because a
// count moved: one Applied Event per pod naming its containers and their node (not one per
// container: a rollout of many pods would queue an Event storm behind the client's rate
// limiter), one Warning per container and reason, and one Conflict Event per pod. Counts
// live in the status and the metrics; a Warning's message is the first one of its reason,
// and a churning container whose count changes every pass gets no new Event.
func (r *NodeAgentReconciler) recordEvents(plans []podPlan, results map[nodeagent.ContainerKey]nodeagent.ContainerResult) {
	seen := map[nodeagent.ContainerKey]bool{}
	seenPods := map[types.UID]bool{}
	for _, p := range plans {
		seenPods[p.pod.UID] = true
		if msg := conflictMessage(p.plan); msg != r.conflicts[p.pod.UID] {
			r.conflicts[p.pod.UID] = msg
			if msg != "" {
				r.recorder.Eventf(p.pod, nil, corev1.EventTypeNormal, "Conflict", "Select", "%s", msg)
			}
		}
		var applied []nodeagent.Desire
		for _, d := range p.plan.Desires {
			res, ok := results[d.Key()]
			if !ok || res.Desire != d {
				continue // not acted on yet
			}
			seen[d.Key()] = true
			if res.Reason == numav1.ReasonApplied {
				applied = append(applied, d)
			}
			if r.reported[d.Key()] == res.Reason {
				continue
			}
			r.reported[d.Key()] = res.Reason
			if res.Reason != numav1.ReasonApplied && !quietReason(p.pod, res.Reason) {
				r.recorder.Eventf(p.pod, nil, corev1.EventTypeWarning, res.Reason, "SetPreferredNode",
					"container %s: %s", d.Container, res.Message)
			}
		}
		if msg := appliedMessage(applied); msg != r.applied[p.pod.UID] {
			r.applied[p.pod.UID] = msg
			if msg != "" {
				r.recorder.Eventf(p.pod, nil, corev1.EventTypeNormal, numav1.ReasonApplied, "SetPreferredNode", "%s", msg)
			}
		}
	}
	for k := range r.reported {
		if !seen[k] {
			delete(r.reported, k)
		}
	}
	for _, m := range []map[types.UID]string{r.conflicts, r.applied} {
		for uid := range m {
			if !seenPods[uid] {
				delete(m, uid)
			}
		}
	}
}

// quietReason tells the outcomes that get no Warning: transient and expected ones.
func quietReason(pod *corev1.Pod, reason string) bool {
	switch reason {
	case numav1.ReasonContainerNotRunning:
		return true // starting or stopped
	case numav1.ReasonContainerNotFound:
		return pod.DeletionTimestamp != nil // the runtime removed a terminating pod's cgroups before kubelet said so
	}
	return false
}

// appliedMessage says which containers of a pod prefer which node, and why, grouped by node
// and source: "prefers NUMA node 0 (NumaPreference db): containers app, log".
func appliedMessage(applied []nodeagent.Desire) string {
	groups := map[string][]string{}
	for _, d := range applied {
		head := fmt.Sprintf("prefers NUMA node %d (%s)", d.Node, desireSource(d))
		groups[head] = append(groups[head], d.Container)
	}
	var parts []string
	for _, head := range slices.Sorted(maps.Keys(groups)) {
		names := groups[head]
		slices.Sort(names)
		noun := "containers"
		if len(names) == 1 {
			noun = "container"
		}
		parts = append(parts, fmt.Sprintf("%s: %s %s", head, noun, strings.Join(names, ", ")))
	}
	return strings.Join(parts, "; ")
}

func desireSource(d nodeagent.Desire) string {
	if d.Preference == "" {
		return "pod annotation"
	}
	return "NumaPreference " + d.Preference
}

func conflictMessage(plan nodeagent.PodPlan) string {
	var parts []string
	for _, c := range plan.Conflicts {
		parts = append(parts, fmt.Sprintf("container %s follows %s, not NumaPreference %s", c.Container, c.Winner, c.Preference))
	}
	slices.Sort(parts)
	return strings.Join(slices.Compact(parts), "; ")
}

// reportStatus applies this node's entry in every NumaPreference whose entry changed, and
// withdraws it from those that no longer select anything here. Unchanged entries cost no
// write: they are compared with the cached object first.
func (r *NodeAgentReconciler) reportStatus(ctx context.Context, plans []podPlan, prefs []numav1.NumaPreference, results map[nodeagent.ContainerKey]nodeagent.ContainerResult) error {
	var pp []nodeagent.PodPlan
	for _, p := range plans {
		pp = append(pp, p.plan)
	}
	entries := nodeagent.NodeEntries(r.nodeName, pp, results)
	var errs []error
	for i := range prefs {
		pref := &prefs[i]
		if pref.DeletionTimestamp != nil {
			continue
		}
		want, wanted := entries[pref.Namespace+"/"+pref.Name]
		have, has := findNodeEntry(pref, r.nodeName)
		if wanted == has && (!wanted || equality.Semantic.DeepEqual(want, have)) {
			continue
		}
		if err := r.applyEntry(ctx, pref, want, wanted); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("reporting status of node %s: %v", r.nodeName, errs)
	}
	return nil
}

func findNodeEntry(pref *numav1.NumaPreference, node string) (numav1.NodeStatus, bool) {
	for _, n := range pref.Status.Nodes {
		if n.NodeName == node {
			return n, true
		}
	}
	return numav1.NodeStatus{}, false
}

// applyEntry server-side-applies this node's entry under a field manager of its own, so
// agents on different nodes never conflict. Applying no entry removes the one it owned.
func (r *NodeAgentReconciler) applyEntry(ctx context.Context, pref *numav1.NumaPreference, entry numav1.NodeStatus, present bool) error {
	status := numaac.NumaPreferenceStatus()
	if present {
		e := numaac.NodeStatus().WithNodeName(entry.NodeName).WithPods(entry.Pods).
			WithContainers(entry.Containers).WithTasks(entry.Tasks)
		for _, s := range entry.Skipped {
			e.WithSkipped(numaac.ReasonCount().WithReason(s.Reason).WithCount(s.Count))
		}
		for _, f := range entry.Failed {
			e.WithFailed(numaac.ReasonCount().WithReason(f.Reason).WithCount(f.Count))
		}
		status.WithNodes(e)
	} else {
		status.Nodes = []numaac.NodeStatusApplyConfiguration{} // owning no entry withdraws it
	}
	ac := numaac.NumaPreference(pref.Name, pref.Namespace).WithStatus(status)
	err := r.client.Status().Apply(ctx, ac, client.FieldOwner(AgentFieldManager(r.nodeName)), client.ForceOwnership)
	if apierrors.IsNotFound(err) {
		return nil // deleted meanwhile: nothing to report on
	}
	if present && apierrors.IsInvalid(err) {
		// status.nodes is full (MaxNodeEntries): retrying cannot help. Say so once per
		// change; Events and metrics still tell what this node does.
		r.recorder.Eventf(pref, nil, corev1.EventTypeWarning, numav1.ReasonStatusTruncated, "ReportStatus",
			"node %s cannot add its status entry: %v", r.nodeName, err)
		return nil
	}
	if err != nil {
		return fmt.Errorf("applying status entry to NumaPreference %s/%s: %w", pref.Namespace, pref.Name, err)
	}
	ctrl.LoggerFrom(ctx).V(2).Info("Reported node status", "numaPreference", types.NamespacedName{Namespace: pref.Namespace, Name: pref.Name}, "present", present)
	return nil
}

// AgentFieldManager is the server-side-apply field manager of the agent on node.
func AgentFieldManager(node string) string { return "numapref-agent/" + node }

// nodeEntryChanged tells whether this node's entry differs between two versions.
func nodeEntryChanged(node string, a, b *numav1.NumaPreference) bool {
	ea, oka := findNodeEntry(a, node)
	eb, okb := findNodeEntry(b, node)
	return oka != okb || !equality.Semantic.DeepEqual(ea, eb)
}

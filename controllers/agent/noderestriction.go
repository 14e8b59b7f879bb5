// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
	"github.com/numapref/numapref/internal/metrics"
)

// The node restriction check. RBAC lets every agent write every node's report and labels;
// only the node restriction policy (config/rbac/node_restriction_policy.yaml) holds each to
// its own node, and nothing in the API says when that policy is gone: a cluster before
// 1.30, an admission plugin turned off, a binding deleted or an identity renamed. So each
// agent asks the API, at start and then every interval, for two writes the policy refuses,
// as dry runs (dryRun=All: nothing is stored whatever the answer): another node's report,
// and a label outside numapref.io/ on its own Node. Both refused: the restriction holds.
// Either accepted: it is missing, and the agent says so (metric, Node Event, its report's
// NodeRestricted condition, which the summarizer carries into every preference it reports).
// The agent itself writes the same either way: its own report and its own labels.

// restrictionProbeLabel is the label the check asks to set on its own Node: outside
// numapref.io/, so the policy refuses it.
const restrictionProbeLabel = "restriction-check.numapref.io/must-be-refused"

// restrictionRetry is how soon a check whose answer was neither a refusal nor an
// acceptance (the API unreachable, a server error) is tried again, at most.
const restrictionRetry = 30 * time.Second

// restrictionVerdict is the answer of one check: Status True (the restriction holds) or
// False (missing), or Unknown before the first answer.
type restrictionVerdict struct {
	Status  metav1.ConditionStatus
	Message string
}

// probeReportName is a NumaNodeReport name that is not node's.
func probeReportName(node string) string {
	const name = "numapref-restriction-check"
	if node == name {
		return name + "-other"
	}
	return name
}

// probeRestriction asks the API for the two dry-run writes the policy refuses. An error
// means the answers said neither refused nor accepted.
func probeRestriction(ctx context.Context, c client.Client, node string) (restrictionVerdict, error) {
	other := probeReportName(node)
	// Not AgentFieldManager(node): a field manager has at most 128 characters, a node name 253.
	owner := client.FieldOwner("numapref-agent-restriction-check")
	err := c.Create(ctx, &numav1.NumaNodeReport{ObjectMeta: metav1.ObjectMeta{Name: other}}, client.DryRunAll, owner)
	reportRefused, err := refused(err)
	if err != nil {
		return restrictionVerdict{}, fmt.Errorf("writing NumaNodeReport %s (dry run): %w", other, err)
	}
	label := corev1ac.Node(node).WithLabels(map[string]string{restrictionProbeLabel: "true"})
	err = c.Apply(ctx, label, client.DryRunAll, owner)
	labelRefused, err := refused(err)
	if err != nil {
		return restrictionVerdict{}, fmt.Errorf("labelling Node %s with %s (dry run): %w", node, restrictionProbeLabel, err)
	}
	var accepted []string
	if !reportRefused {
		accepted = append(accepted, "NumaNodeReport "+other+" of another node")
	}
	if !labelRefused {
		accepted = append(accepted, "label "+restrictionProbeLabel+" on its own Node")
	}
	if len(accepted) > 0 {
		return restrictionVerdict{Status: metav1.ConditionFalse, Message: fmt.Sprintf(
			"the API accepted the agent's dry-run write of %s, which the node restriction policy refuses: "+
				"the agent of any node could write other nodes' reports and labels", strings.Join(accepted, " and "))}, nil
	}
	return restrictionVerdict{Status: metav1.ConditionTrue, Message: fmt.Sprintf(
		"the API refused the agent's dry-run writes of NumaNodeReport %s and of label %s", other, restrictionProbeLabel)}, nil
}

// refused tells the node restriction policy's refusal from an acceptance (success, or a
// report that exists already, which is checked after admission). Only the policy's own
// denial proves the restriction: a ValidatingAdmissionPolicy's, Invalid by default or
// Forbidden with its reason set. Any other answer, a 403 from RBAC or another admission
// plugin, or a webhook that cannot dry-run, is returned as the error: it proves neither.
func refused(err error) (bool, error) {
	switch {
	case (apierrors.IsForbidden(err) || apierrors.IsInvalid(err)) && policyDenial(err):
		return true, nil
	case err == nil, apierrors.IsAlreadyExists(err):
		return false, nil
	default:
		return false, err
	}
}

// policyDenial says whether err is a ValidatingAdmissionPolicy's denial, as the API server
// words it: "ValidatingAdmissionPolicy '<policy>' with binding '<binding>' denied request".
func policyDenial(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "ValidatingAdmissionPolicy '") && strings.Contains(msg, "denied request")
}

// restrictionCheck runs probeRestriction at start and every interval (jittered by a tenth,
// so that a fleet started at once does not ask at once), sets the metric, and tells the
// node agent controller when the verdict changes.
type restrictionCheck struct {
	client   client.Client
	node     string
	interval time.Duration
	changes  chan<- event.GenericEvent

	mu      sync.Mutex
	verdict restrictionVerdict
}

func newRestrictionCheck(c client.Client, node string, interval time.Duration, changes chan<- event.GenericEvent) *restrictionCheck {
	return &restrictionCheck{client: c, node: node, interval: interval, changes: changes,
		verdict: restrictionVerdict{Status: metav1.ConditionUnknown}}
}

// Verdict is the last answer (Status Unknown before the first).
func (c *restrictionCheck) Verdict() restrictionVerdict {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.verdict
}

// Start checks until ctx ends. It runs on every agent (NeedLeaderElection).
func (c *restrictionCheck) Start(ctx context.Context) error {
	log := ctrl.LoggerFrom(ctx).WithName("node-restriction")
	for {
		next := wait.Jitter(c.interval, 0.1)
		v, err := probeRestriction(ctx, c.client, c.node)
		if err != nil {
			log.Error(err, "Checking the node restriction: the API's answer proves neither that it holds nor that it is missing; trying again", "in", min(next, restrictionRetry))
			next = min(next, restrictionRetry)
			// Unknown is loud: the report's condition, the gauge (-1) and an alert say so.
			c.record(ctx, restrictionVerdict{Status: metav1.ConditionUnknown, Message: "the check got no answer that proves the restriction either way: " + err.Error()})
		} else {
			c.record(ctx, v)
			if v.Status == metav1.ConditionFalse {
				// A policy installed with the agent (the same helm install) is enforced
				// seconds after it: a missing restriction is checked again soon, not only
				// after the whole interval.
				next = min(next, restrictionRetry)
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(next):
		}
	}
}

// record keeps v, sets the metric and, when the verdict changed, wakes the controller.
func (c *restrictionCheck) record(ctx context.Context, v restrictionVerdict) {
	reportRestriction(v.Status)
	c.mu.Lock()
	changed := c.verdict != v
	c.verdict = v
	c.mu.Unlock()
	if !changed {
		return
	}
	ctrl.LoggerFrom(ctx).Info("Node restriction checked", "restricted", v.Status, "detail", v.Message)
	node := &corev1.Node{}
	node.Name = c.node
	select {
	case c.changes <- event.GenericEvent{Object: node}:
	case <-ctx.Done():
	}
}

func (*restrictionCheck) NeedLeaderElection() bool { return false }

// restrictionConditions is the report's conditions for verdict v, from the ones the report
// has: the NodeRestricted condition keeps its transition time while its status holds, and
// stays as it is until the first answer.
func restrictionConditions(have []metav1.Condition, v restrictionVerdict, now time.Time) []metav1.Condition {
	conds := make([]metav1.Condition, len(have))
	copy(conds, have)
	if v.Status == metav1.ConditionUnknown && v.Message == "" {
		return nilIfEmpty(conds) // no answer yet
	}
	c := metav1.Condition{Type: numav1.ConditionNodeRestricted, Status: v.Status, Message: v.Message,
		Reason: numav1.ReasonNodeRestrictionEnforced, LastTransitionTime: metav1.NewTime(now.Truncate(time.Second))}
	switch v.Status {
	case metav1.ConditionFalse:
		c.Reason = numav1.ReasonNodeRestrictionMissing
	case metav1.ConditionUnknown:
		c.Reason = numav1.ReasonNodeRestrictionUnproven
	}
	meta.SetStatusCondition(&conds, c)
	return conds
}

func nilIfEmpty[T any](s []T) []T {
	if len(s) == 0 {
		return nil
	}
	return s
}

// warnRestrictionMissing gives the Node a Warning Event each time the check finds the
// restriction missing (again); the reconciler calls it with the current verdict.
func (r *NodeAgentReconciler) warnRestrictionMissing(ctx context.Context, v restrictionVerdict) {
	missing := v.Status == metav1.ConditionFalse
	if missing == r.restrictionWarned {
		return
	}
	if !missing {
		r.restrictionWarned = false
		return
	}
	var node corev1.Node
	if err := r.reader.Get(ctx, client.ObjectKey{Name: r.nodeName}, &node); err != nil {
		ctrl.LoggerFrom(ctx).V(2).Info("Reading the Node for its NodeRestrictionMissing Event", "error", err.Error())
		return
	}
	r.recorder.Eventf(&node, nil, corev1.EventTypeWarning, numav1.ReasonNodeRestrictionMissing, "CheckNodeRestriction", "%s", v.Message)
	r.restrictionWarned = true
}

// reportRestriction sets numapref_node_restriction_missing from the check's verdict: 1
// missing, 0 holding, -1 while the answers prove neither.
func reportRestriction(status metav1.ConditionStatus) {
	v := 0.0
	switch status {
	case metav1.ConditionFalse:
		v = 1
	case metav1.ConditionUnknown:
		v = -1
	}
	metrics.NodeRestrictionMissing.Set(v)
}

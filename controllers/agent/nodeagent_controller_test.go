// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
	"github.com/numapref/numapref/internal/nodeagent/desire"
	"github.com/numapref/numapref/internal/nodeagent/plan"
	"github.com/numapref/numapref/internal/testutil/builders"
	"github.com/numapref/numapref/internal/testutil/ctrltest"
)

// The node agent's reconciler against a fake client and a scripted engine: one pass, from
// a pod and a NumaPreference to the desired state the engine gets, the node's report and
// the pod's Events. The envtest specs (numapreference_test.go) run it in a manager against
// a real apiserver.
func TestNodeAgentReconcile(t *testing.T) {
	const node = "node-a"
	pref := builders.MakePreference("shop", "db").Selector("app", "db").Node(1).Generation(2).Obj()
	running := builders.MakePod("shop", "db-0").UID("uid-db-0").Node(node).Label("app", "db").Containers("app").Running().Obj()
	pending := builders.MakePod("shop", "db-0").UID("uid-db-0").Node(node).Label("app", "db").Containers("app").Obj()
	applied := func(d desire.Desire) plan.Result {
		if d.Refusal != "" {
			return plan.Result{Desire: d, Reason: d.Refusal, Message: d.Message}
		}
		return plan.Result{Desire: d, Reason: numav1.ReasonApplied, Node: d.Node, Tasks: 5}
	}
	pinned := func(d desire.Desire) plan.Result {
		return plan.Result{Desire: d, Reason: numav1.ReasonMemoryPinnedElsewhere, Message: "cpuset.mems of the container is 0"}
	}
	entry := func(e numav1.PreferenceReport) []numav1.PreferenceReport {
		e.Namespace, e.Name, e.Generation, e.Pods = "shop", "db", 2, 1
		return []numav1.PreferenceReport{e}
	}
	tests := map[string]struct {
		pod        *corev1.Pod
		balancing  string
		outcome    func(desire.Desire) plan.Result
		wantDesire desire.Desire // the fields Container, Node, Preference and Refusal
		wantTotals numav1.ReportTotals
		wantEntry  []numav1.PreferenceReport
		wantEvents []string
	}{
		"a selected running container gets the preference's node": {
			pod: running, balancing: "normal", outcome: applied,
			wantDesire: desire.Desire{Container: "app", Node: 1, Preference: "db"},
			wantTotals: numav1.ReportTotals{Preferences: 1, Pods: 1, Tasks: 5},
			wantEntry:  entry(numav1.PreferenceReport{Containers: 1, Tasks: 5, PodsByNode: []numav1.NodeCount{{Node: 1, Pods: 1}}}),
			wantEvents: []string{"Normal Applied prefers NUMA node 1 (NumaPreference db): container app"},
		},
		"memory pinned elsewhere is a problem, with a Warning": {
			pod: running, balancing: "normal", outcome: pinned,
			wantDesire: desire.Desire{Container: "app", Node: 1, Preference: "db"},
			wantTotals: numav1.ReportTotals{Preferences: 1, Pods: 1, Problems: 1},
			wantEntry:  entry(numav1.PreferenceReport{Skipped: []numav1.ReasonCount{{Reason: numav1.ReasonMemoryPinnedElsewhere, Count: 1}}}),
			wantEvents: []string{"Warning MemoryPinnedElsewhere container app: cpuset.mems of the container is 0"},
		},
		"a container not running yet waits: no problem, no Event": {
			pod: pending, balancing: "normal", outcome: applied,
			wantDesire: desire.Desire{Container: "app", Node: 1, Preference: "db", Refusal: numav1.ReasonContainerNotRunning},
			wantTotals: numav1.ReportTotals{Preferences: 1, Pods: 1},
			wantEntry:  entry(numav1.PreferenceReport{Skipped: []numav1.ReasonCount{{Reason: numav1.ReasonContainerNotRunning, Count: 1}}}),
		},
		"placed where NUMA balancing is disabled is ineffective, with a Warning": {
			pod: running, balancing: "disabled", outcome: applied,
			wantDesire: desire.Desire{Container: "app", Node: 1, Preference: "db"},
			wantTotals: numav1.ReportTotals{Preferences: 1, Pods: 1, Tasks: 5, Problems: 1},
			wantEntry: entry(numav1.PreferenceReport{Containers: 1, Tasks: 5, PodsByNode: []numav1.NodeCount{{Node: 1, Pods: 1}},
				Ineffective: []numav1.ReasonCount{{Reason: numav1.ReasonNumaBalancingDisabled, Count: 1}}}),
			wantEvents: []string{
				"Normal Applied prefers NUMA node 1 (NumaPreference db): container app",
				"Warning NumaBalancingDisabled kernel.numa_balancing is disabled on node node-a: the kernel ignores the preferred node until it is enabled",
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			c := ctrltest.FakeAPI(t, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node, UID: "node-uid"}}, tc.pod, pref)
			engine := newScriptedEngine(tc.outcome)
			recorder := events.NewFakeRecorder(10)
			facts := NodeFacts{KernelSupport: "emulator", NUMABalancing: tc.balancing, NUMANodes: 2}
			r := NewNodeAgentReconciler(c, c, node, engine, recorder, NodeAgentOptions{
				Facts: func() NodeFacts { return facts }, Clock: clocktesting.NewFakePassiveClock(time.Unix(1000, 0)),
			})

			if _, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: types.NamespacedName{Name: node}}); err != nil {
				t.Fatalf("Reconcile: %v", err)
			}

			d, ok := engine.Desired(tc.pod, "app")
			if !ok {
				t.Fatal("the engine was given no desire for container app")
			}
			got := desire.Desire{Container: d.Container, Node: d.Node, Preference: d.Preference, Refusal: d.Refusal}
			if diff := cmp.Diff(tc.wantDesire, got); diff != "" {
				t.Errorf("desire handed to the engine (-want +got):\n%s", diff)
			}
			var rep numav1.NumaNodeReport
			if err := c.Get(ctx, client.ObjectKey{Name: node}, &rep); err != nil {
				t.Fatalf("reading the node's report: %v", err)
			}
			want := numav1.NumaNodeReportStatus{KernelSupport: "emulator", NumaBalancing: tc.balancing, NumaNodes: 2, Mechanisms: []string{"prctl"},
				Totals: tc.wantTotals, Preferences: tc.wantEntry}
			if diff := cmp.Diff(want, rep.Status); diff != "" {
				t.Errorf("report (-want +got):\n%s", diff)
			}
			if len(rep.OwnerReferences) != 1 || rep.OwnerReferences[0].UID != "node-uid" {
				t.Errorf("report owners = %+v, want the Node (uid node-uid)", rep.OwnerReferences)
			}
			if diff := cmp.Diff(tc.wantEvents, drain(recorder.Events)); diff != "" {
				t.Errorf("pod Events (-want +got):\n%s", diff)
			}
		})
	}
}

// drain returns the Events recorded so far, in order.
func drain(ch chan string) []string {
	var out []string
	for {
		select {
		case e := <-ch:
			out = append(out, e)
		default:
			return out
		}
	}
}

// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package nri

import (
	"context"
	"testing"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
	"github.com/numapref/numapref/internal/cpuset"
	"github.com/numapref/numapref/internal/nodeagent/cgroups"
	"github.com/numapref/numapref/internal/nodeagent/desire"
	"github.com/numapref/numapref/internal/nodeagent/plan"
	"github.com/numapref/numapref/internal/numa/mempolicy"
	"github.com/numapref/numapref/internal/testutil/builders"
	"github.com/numapref/numapref/internal/testutil/ctrltest"
)

// startRecorder is an engine that records what it is asked to place at a start.
type startRecorder []desire.Desire

func (r *startRecorder) PolicyAtCreation(d desire.Desire, _ cpuset.Cpuset) (plan.Result, mempolicy.Policy, bool) {
	*r = append(*r, d)
	return plan.Result{Desire: d, Reason: numav1.ReasonApplied, Node: d.Node}, mempolicy.Preferred(d.Node), true
}

func (r *startRecorder) PlaceAtStart(d desire.Desire) (plan.Result, bool) {
	*r = append(*r, d)
	return plan.Result{Desire: d, Reason: numav1.ReasonApplied}, true
}

// TestStartPlacerWhichPod: the cached pod decides when it is the one the runtime starts (a
// static pod's mirror pod too, by the UID it names the cgroup with), keyed as the API path
// keys it; a pod the cache does not hold yet is made of the sandbox; another pod of the
// same name (a pod made again) is left to the API path. Narrow: the cache is
// a fake; controllers/agent's envtest spec "Placing a container at its start (NRI)"
// runs the real one.
func TestStartPlacerWhichPod(t *testing.T) {
	id := "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	cached := builders.MakePod("ns", "db-0").Label("app", "db").Containers("main").Obj()
	cached.UID = "uid-cached"
	// A static pod's mirror, made by its node's kubelet: its cgroup is the static pod's
	// UID, the one the sandbox carries.
	const staticUID = "0a1b2c3d4e5f60718293a4b5c6d7e8f9"
	mirror := builders.MakePod("ns", "etcd-node-a").Label("app", "db").Containers("main").Obj()
	mirror.UID = "uid-mirror-object"
	mirror.Annotations = map[string]string{"kubernetes.io/config.mirror": staticUID}
	mirror.Spec.NodeName = "node-a"
	mirror.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: "node-a", UID: "node-uid", Controller: ptr.To(true)}}
	pref := builders.MakePreference("ns", "db").Selector("app", "db").Node(1).Obj()
	for name, tc := range map[string]struct {
		start   Start
		want    int  // desires placed
		noUID   bool // the node's UID not read yet
		forgery bool // the mirror's owner names the node with another UID
	}{
		"the cached pod":                  {start: Start{PodUID: "uid-cached", Namespace: "ns", PodName: "db-0", Container: "main", ContainerID: id}, want: 1},
		"not cached yet":                  {start: Start{PodUID: "uid-new", Namespace: "ns", PodName: "db-1", Labels: map[string]string{"app": "db"}, Container: "main", ContainerID: id}, want: 1},
		"another db-0":                    {start: Start{PodUID: "uid-mirror", Namespace: "ns", PodName: "db-0", Labels: map[string]string{"app": "db"}, Container: "main", ContainerID: id}, want: 0},
		"a static pod, its mirror cached": {start: Start{PodUID: staticUID, Namespace: "ns", PodName: "etcd-node-a", Labels: map[string]string{"app": "db"}, Container: "main", ContainerID: id}, want: 1},
		// Until the reconciler has read the Node's UID, no pod is a mirror pod: the static
		// pod is placed once it has.
		"a static pod, the node's UID unknown": {start: Start{PodUID: staticUID, Namespace: "ns", PodName: "etcd-node-a", Labels: map[string]string{"app": "db"}, Container: "main", ContainerID: id}, noUID: true},
		// An owner reference naming the node, with any UID but the Node's, makes no mirror.
		"a forged mirror, the node's name": {start: Start{PodUID: staticUID, Namespace: "ns", PodName: "etcd-node-a", Labels: map[string]string{"app": "db"}, Container: "main", ContainerID: id}, forgery: true},
		"an unselected pod":                {start: Start{PodUID: "uid-web", Namespace: "ns", PodName: "web-0", Labels: map[string]string{"app": "web"}, Container: "main", ContainerID: id}, want: 0},
	} {
		t.Run(name, func(t *testing.T) {
			m := mirror.DeepCopy()
			if tc.forgery {
				m.OwnerReferences[0].UID = "forged"
			}
			reader := ctrltest.FakeAPI(t, cached.DeepCopy(), m, pref.DeepCopy())
			node := cgroups.NewNodeIdentity("node-a")
			if !tc.noUID {
				node.SetUID("node-uid")
			}
			var engine startRecorder
			NewStartPlacer(reader, node, &engine, nil, logr.Discard()).PlaceAtStart(context.Background(), tc.start)
			if len(engine) != tc.want {
				t.Fatalf("placed %+v, want %d", engine, tc.want)
			}
			if tc.want == 0 {
				return
			}
			d := engine[0]
			if string(d.PodUID) != tc.start.PodUID || d.Node != 1 || d.Preference != "db" || d.Ref.ContainerID != id || d.Refusal != "" {
				t.Errorf("desire %+v, want pod %s at node 1 from db, container %s", d, tc.start.PodUID, id)
			}
		})
	}
}

// A start never waits for the agent's cache, selected or not: the cache is read with a
// context already done, which an unsynced cache fails at once (a synced one answers: the
// envtest specs in controllers/agent place at start through the real cache).
func TestStartDoesNotWaitForTheCache(t *testing.T) {
	r := &waitingReader{}
	var engine startRecorder
	start := Start{PodUID: "uid-web", Namespace: "ns", PodName: "web-0", Labels: map[string]string{"app": "web"}, Container: "main", ContainerID: "containerd://abc"}
	NewStartPlacer(r, cgroups.NewNodeIdentity("node-a"), &engine, nil, logr.Discard()).PlaceAtStart(context.Background(), start)
	if !r.doneAtEntry {
		t.Error("the cache was read with a context that was not done: an unsynced cache would hold the start")
	}
	if len(engine) != 0 {
		t.Errorf("placed %+v with no cache and nothing persisted", engine)
	}
}

// waitingReader is a cache that has not synced: its reads wait for their context.
type waitingReader struct {
	client.Reader
	doneAtEntry bool
}

func (r *waitingReader) List(ctx context.Context, _ client.ObjectList, _ ...client.ListOption) error {
	r.doneAtEntry = ctx.Err() != nil
	<-ctx.Done()
	return ctx.Err()
}

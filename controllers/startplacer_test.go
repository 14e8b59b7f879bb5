package controllers

import (
	"context"
	"testing"

	"github.com/go-logr/logr"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
	"github.com/numapref/numapref/internal/nodeagent"
	"github.com/numapref/numapref/internal/nodeagent/nri"
	"github.com/numapref/numapref/internal/testutil/builders"
)

// startRecorder is an engine that records what it is asked to place at a start.
type startRecorder []nodeagent.Desire

func (r *startRecorder) PlaceAtStart(d nodeagent.Desire) (nodeagent.ContainerResult, bool) {
	*r = append(*r, d)
	return nodeagent.ContainerResult{Desire: d, Reason: numav1.ReasonApplied}, true
}

// TestStartPlacerWhichPod: the cached pod decides when it is the one the runtime starts;
// a pod the cache does not hold yet is made of the sandbox; another pod of the same name
// (a static pod's mirror, a pod made again) is left to the API path. Narrow: the cache is
// a fake; the envtest spec "Placing a container at its start (NRI)" runs the real one.
func TestStartPlacerWhichPod(t *testing.T) {
	id := "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	cached := builders.MakePod("ns", "db-0").Label("app", "db").Containers("main").Obj()
	cached.UID = "uid-cached"
	pref := builders.MakePreference("ns", "db").Selector("app", "db").Node(1).Obj()
	for name, tc := range map[string]struct {
		start nri.Start
		want  int // desires placed
	}{
		"the cached pod":    {nri.Start{PodUID: "uid-cached", Namespace: "ns", PodName: "db-0", Container: "main", ContainerID: id}, 1},
		"not cached yet":    {nri.Start{PodUID: "uid-new", Namespace: "ns", PodName: "db-1", Labels: map[string]string{"app": "db"}, Container: "main", ContainerID: id}, 1},
		"another db-0":      {nri.Start{PodUID: "uid-mirror", Namespace: "ns", PodName: "db-0", Labels: map[string]string{"app": "db"}, Container: "main", ContainerID: id}, 0},
		"an unselected pod": {nri.Start{PodUID: "uid-web", Namespace: "ns", PodName: "web-0", Labels: map[string]string{"app": "web"}, Container: "main", ContainerID: id}, 0},
	} {
		t.Run(name, func(t *testing.T) {
			reader := fakeAPI(t, cached.DeepCopy(), pref.DeepCopy())
			var engine startRecorder
			NewStartPlacer(reader, &engine, logr.Discard()).PlaceAtStart(context.Background(), tc.start)
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

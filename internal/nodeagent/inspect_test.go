// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package nodeagent

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
	"github.com/numapref/numapref/internal/inspect"
	"github.com/numapref/numapref/internal/nodeagent/cgroups"
	"github.com/numapref/numapref/internal/nodeagent/desire"
)

// allowAll lets every caller get every pod (the server's SubjectAccessReview is tested in
// internal/serving and cmd/kubectl-numapref).
type allowAll struct{}

func (allowAll) CanGetPod(context.Context, string, string) (bool, string, error) {
	return true, "", nil
}

// podMap is the agent's pod cache in these tests: the pods it holds, by namespace/name.
func podMap(pods ...*corev1.Pod) PodGetter {
	return func(_ context.Context, ns, name string) (*corev1.Pod, error) {
		for _, p := range pods {
			if p.Namespace == ns && p.Name == name {
				return p.DeepCopy(), nil
			}
		}
		return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "pods"}, name)
	}
}

func getInspect(t *testing.T, h http.Handler, method, path string) (*httptest.ResponseRecorder, []byte) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(method, path, nil))
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
		t.Errorf("%s %s: Content-Type %q, want application/json", method, path, ct)
	}
	return rec, rec.Body.Bytes()
}

// TestInspectErrors: requests that fail before the host is read (the engine has nothing
// to tell about them).
func TestInspectErrors(t *testing.T) {
	e := newFakeHost(t).engine(EngineConfig{})
	elsewhere := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "elsewhere"}, Spec: corev1.PodSpec{NodeName: "node-b"}}
	pods := podMap(elsewhere)
	failing := func(ctx context.Context, ns, name string) (*corev1.Pod, error) {
		if name == "broken" {
			return nil, errors.New("cache not synced")
		}
		return pods(ctx, ns, name)
	}
	h := inspect.NewHandler(NewPodInspector(cgroups.NewNodeIdentity("node-a"), failing, e), allowAll{})
	tests := map[string]struct {
		method, path string
		status       int
		errContains  string
	}{
		"unknown pod":         {http.MethodGet, "/inspect/ns/nope", http.StatusNotFound, "not known on node node-a"},
		"pod on another node": {http.MethodGet, "/inspect/ns/elsewhere", http.StatusNotFound, `runs on node "node-b"`},
		"no pod name":         {http.MethodGet, "/inspect/ns", http.StatusBadRequest, "want /inspect/<namespace>/<pod>"},
		"empty pod name":      {http.MethodGet, "/inspect/ns/", http.StatusBadRequest, "want /inspect/<namespace>/<pod>"},
		"too many parts":      {http.MethodGet, "/inspect/ns/db/main", http.StatusBadRequest, "want /inspect/<namespace>/<pod>"},
		"invalid namespace":   {http.MethodGet, "/inspect/Not_A_Namespace/db", http.StatusBadRequest, "namespace"},
		"invalid pod name":    {http.MethodGet, "/inspect/ns/db..x", http.StatusBadRequest, "pod name"},
		"not read-only":       {http.MethodPost, "/inspect/ns/elsewhere", http.StatusMethodNotAllowed, "read-only"},
		"cache failure":       {http.MethodGet, "/inspect/ns/broken", http.StatusInternalServerError, "cache not synced"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			rec, body := getInspect(t, h, tc.method, tc.path)
			var got inspect.Error
			if err := json.Unmarshal(body, &got); err != nil {
				t.Fatalf("decoding %s: %v", body, err)
			}
			if rec.Code != tc.status || got.Status != tc.status || !strings.Contains(got.Error, tc.errContains) {
				t.Errorf("%s %s = %d %+v, want %d with error containing %q", tc.method, tc.path, rec.Code, got, tc.status, tc.errContains)
			}
		})
	}
}

// TestInspectDescribesOnlySelectedPods: a pod with a selected container is described with
// its host side (container ids, cgroups, tasks), and the selected container with the
// engine's outcome (how it was placed); a pod without one only as not selected, whatever
// runs in it.
func TestInspectDescribesOnlySelectedPods(t *testing.T) {
	h := newFakeHost(t)
	h.addTask(100, -1)
	h.addTask(101, -1)
	e := h.engine(EngineConfig{})
	e.SetDesired([]desire.Desire{fakeDesire(1)})
	e.Pass()
	running := corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}
	pod := func(name string, uid types.UID) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: uid},
			Spec:       corev1.PodSpec{NodeName: "node-a", Containers: []corev1.Container{{Name: "main"}, {Name: "side"}}},
			Status: corev1.PodStatus{QOSClass: corev1.PodQOSBurstable, ContainerStatuses: []corev1.ContainerStatus{
				{Name: "main", ContainerID: "containerd://x", State: running}, {Name: "side", ContainerID: "containerd://y", State: running}}},
		}
	}
	handler := inspect.NewHandler(NewPodInspector(cgroups.NewNodeIdentity("node-a"), podMap(pod("selected", "pod"), pod("bystander", "other")), e), allowAll{})
	answer := func(name string) inspect.Pod {
		t.Helper()
		rec, body := getInspect(t, handler, http.MethodGet, "/inspect/ns/"+name)
		if rec.Code != http.StatusOK {
			t.Fatalf("GET %s: %d %s", name, rec.Code, body)
		}
		var got inspect.Pod
		if err := json.Unmarshal(body, &got); err != nil {
			t.Fatal(err)
		}
		return got
	}

	sel := answer("selected")
	if !sel.Selected || len(sel.Containers) != 2 {
		t.Fatalf("selected pod: selected %v, %d containers", sel.Selected, len(sel.Containers))
	}
	for _, c := range sel.Containers {
		if c.ContainerID == "" || c.Cgroup == nil || len(c.Tasks) != 2 {
			t.Errorf("selected pod, container %s: id %q cgroup %v %d tasks; want the host side of every container", c.Name, c.ContainerID, c.Cgroup, len(c.Tasks))
		}
	}
	main, side := sel.Containers[0], sel.Containers[1]
	if main.Reason != numav1.ReasonApplied || main.ManagedTasks != 2 || main.PlacedAt != PlacedAtAfterStart {
		t.Errorf("selected container: reason %s, %d managed tasks, placedAt %q; want Applied, 2, %q (placed by a full pass)",
			main.Reason, main.ManagedTasks, main.PlacedAt, PlacedAtAfterStart)
	}
	if side.Reason != inspect.ReasonNotSelected || side.PlacedAt != "" {
		t.Errorf("unselected container of the selected pod: reason %s, placedAt %q; want NotSelected, none", side.Reason, side.PlacedAt)
	}

	got := answer("bystander")
	want := inspect.Pod{
		APIVersion: inspect.APIVersion, Kind: inspect.Kind, Node: "node-a", Namespace: "ns", Name: "bystander", UID: "other",
		QOSClass: "Burstable", Kernel: inspect.Kernel{Backend: "fake", Supported: true},
		Containers: []inspect.Container{
			{Name: "main", Reason: inspect.ReasonNotSelected, Tasks: []inspect.Task{}},
			{Name: "side", Reason: inspect.ReasonNotSelected, Tasks: []inspect.Task{}},
		},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("unselected pod (-want +got):\n%s", diff)
	}
}

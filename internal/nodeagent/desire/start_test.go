// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package desire

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
	"github.com/numapref/numapref/internal/nodeagent/cgroups"
	"github.com/numapref/numapref/internal/testutil/builders"
)

// TestPlanStart: a container the runtime starts gets what PlanPod gives it once its
// status is posted, before it is: from the cached pod, and from a pod made of the
// runtime's sandbox alone.
func TestPlanStart(t *testing.T) {
	prefs := []numav1.NumaPreference{
		pref("db", time.Hour, 1, map[string]string{"app": "db"}),
		*builders.MakePreference("ns", "spread").CreatedAt(metav1.NewTime(t0)).SelectorLabels(map[string]string{"tier": "web"}).
			Mode(numav1.PlacementModeSpread).Obj(),
	}
	// The cached pod, as the kubelet has it just before the start: app is waiting.
	pending := func(labels map[string]string) *corev1.Pod {
		p := testPod(labels, nil)
		p.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1500m")}
		p.Status.ContainerStatuses = []corev1.ContainerStatus{
			{Name: "app", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}},
		}
		return p
	}
	sandbox := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "uid-1",
		Labels: map[string]string{"app": "db"}}, Status: corev1.PodStatus{QOSClass: corev1.PodQOSBurstable}}
	for _, tc := range []struct {
		name      string
		pod       *corev1.Pod
		container string
		want      Desire
		ok        bool
	}{
		{"a selected app container, from the cached pod", pending(map[string]string{"app": "db"}), "app", Desire{
			Node: 1, Placement: Placement{Mode: numav1.PlacementModeStatic}, Preference: "db"}, true},
		{"Spread weighs the cached pod's requests", pending(map[string]string{"tier": "web"}), "app", Desire{
			Node: -1, Preference: "spread",
			Placement: Placement{Mode: numav1.PlacementModeSpread, Group: "NumaPreference ns/spread", Weight: 1500}}, true},
		{"an init container is not covered by a preference without containers", pending(map[string]string{"app": "db"}), "init", Desire{}, false},
		{"an unselected pod", pending(map[string]string{"app": "other"}), "app", Desire{}, false},
		{"a pod the cache does not hold yet: the sandbox's labels", sandbox, "main", Desire{
			Node: 1, Placement: Placement{Mode: numav1.PlacementModeStatic}, Preference: "db"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := tc.pod.DeepCopy()
			got, ok := PlanStart(testNode, tc.pod, prefs, tc.container, "containerd://abc")
			if ok != tc.ok {
				t.Fatalf("ok = %v, want %v (%+v)", ok, tc.ok, got)
			}
			if !cmp.Equal(tc.pod, before) {
				t.Errorf("PlanStart changed the cached pod: %s", cmp.Diff(before, tc.pod))
			}
			if !ok {
				return
			}
			want := tc.want
			want.Pod.Namespace, want.Pod.Name, want.PodUID, want.Container = "ns", "p", "uid-1", tc.container
			want.Ref = cgroups.ContainerRef{PodUID: "uid-1", QOS: corev1.PodQOSBurstable, ContainerID: "containerd://abc"}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("desire (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSameContainer(t *testing.T) {
	id := strings.Repeat("ab", 32)
	for _, tc := range []struct {
		a, b string
		want bool
	}{
		{"containerd://" + id, id, true},
		{id, "cri-o://" + id, true},
		{"containerd://" + id, "containerd://" + id, true},
		{"containerd://" + id, strings.Repeat("cd", 32), false},
		{"", "", false}, // a container not running yet is no container
	} {
		if got := SameContainer(tc.a, tc.b); got != tc.want {
			t.Errorf("SameContainer(%q, %q) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
}

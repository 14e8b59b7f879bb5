// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package builders

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
)

func TestMakePod(t *testing.T) {
	w := MakePod("shop", "db-0").UID("u1").Node("node-a").Label("app", "db").Annotation("a", "b").Containers("app", "log").Running()
	pod := w.Obj()
	if pod.Namespace != "shop" || pod.Name != "db-0" || pod.Spec.NodeName != "node-a" || pod.Labels["app"] != "db" || pod.Annotations["a"] != "b" {
		t.Errorf("pod = %+v", pod.ObjectMeta)
	}
	var names, ids []string
	for _, s := range pod.Status.ContainerStatuses {
		if s.State.Running == nil || !s.Ready {
			t.Errorf("container %s is not running and ready: %+v", s.Name, s)
		}
		names, ids = append(names, s.Name), append(ids, s.ContainerID)
	}
	if diff := cmp.Diff([]string{"app", "log"}, names); diff != "" {
		t.Errorf("container statuses (-want +got):\n%s", diff)
	}
	if ids[0] != ContainerID(pod, "app") || ids[0] == ids[1] || len(ids[0]) != len("containerd://")+64 {
		t.Errorf("container IDs %q: want one stable 64-hex containerd ID per container", ids)
	}
	if pod.Status.Phase != corev1.PodRunning {
		t.Errorf("phase = %s, want Running", pod.Status.Phase)
	}
	w.Label("app", "web")
	if pod.Labels["app"] != "db" {
		t.Error("Obj shares its maps with the builder: a later call changed the pod it returned")
	}
}

func TestMakePreference(t *testing.T) {
	got := MakePreference("shop", "db").Selector("app", "db").Mode(numav1.PlacementModeSpread).Nodes(0, 2).Containers("app").Generation(3).Obj()
	want := &numav1.NumaPreference{}
	want.Namespace, want.Name, want.Generation = "shop", "db", 3
	want.Spec.Selector.MatchLabels = map[string]string{"app": "db"}
	want.Spec.Mode, want.Spec.Nodes, want.Spec.Containers = numav1.PlacementModeSpread, []int32{0, 2}, []string{"app"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("preference (-want +got):\n%s", diff)
	}
}

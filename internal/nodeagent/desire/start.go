// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package desire

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
	"github.com/numapref/numapref/internal/nodeagent/cgroups"
)

// PlanStart decides for one container that the runtime is about to start, before the
// kubelet has posted its status: the same PlanPod decides, on pod as if the container
// were already running with containerID (the runtime's form, "containerd://<id>"). pod is
// the agent's cached pod, whose spec holds the container's kind (init or app) and the
// requests a Spread weighs; a pod the cache does not hold yet is made from the runtime's
// sandbox (its metadata and labels only), where the container counts as an app container.
// ok is false when nothing asks for the container.
func PlanStart(node cgroups.Node, pod *corev1.Pod, prefs []numav1.NumaPreference, container, containerID string) (d Desire, ok bool) {
	pod = pod.DeepCopy()
	if !slices.ContainsFunc(PodContainers(pod), func(c PodContainer) bool { return c.Name == container }) {
		pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: container})
	}
	started := corev1.ContainerStatus{Name: container, ContainerID: containerID,
		State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}
	statuses := &pod.Status.ContainerStatuses
	if slices.ContainsFunc(pod.Spec.InitContainers, func(c corev1.Container) bool { return c.Name == container }) {
		statuses = &pod.Status.InitContainerStatuses
	}
	*statuses = slices.DeleteFunc(*statuses, func(s corev1.ContainerStatus) bool { return s.Name == container })
	*statuses = append(*statuses, started)
	for _, d := range PlanPod(node, pod, prefs).Desires {
		if d.Container == container {
			return d, true
		}
	}
	return Desire{}, false
}

// SameContainer says whether two container IDs name one container: the API's has the
// runtime's scheme ("containerd://<id>"), the runtime's own, at a start, may not.
func SameContainer(a, b string) bool {
	return a != "" && BareContainerID(a) == BareContainerID(b)
}

// BareContainerID is a container ID without the runtime's scheme ("containerd://").
func BareContainerID(id string) string {
	if _, rest, ok := strings.Cut(id, "://"); ok {
		return rest
	}
	return id
}

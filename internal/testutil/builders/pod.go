// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

// Package builders makes the pods and NumaPreferences tests need, option by option
// (kueue's pkg/util/testing style): MakePod("ns", "db-0").Label("app", "db").Node("node-a").
// Containers("app").Obj(). Each builder starts from the least object the API accepts and
// adds only what a call asks for.
package builders

import (
	"crypto/sha256"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// DefaultImage is the image of containers added by Containers: never pulled.
const DefaultImage = "example.invalid/app"

// PodWrapper builds a pod.
type PodWrapper struct{ pod corev1.Pod }

// MakePod starts a pod namespace/name without containers.
func MakePod(namespace, name string) *PodWrapper {
	return &PodWrapper{pod: corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}}
}

// Obj returns the pod built so far; later calls on the wrapper do not change it.
func (p *PodWrapper) Obj() *corev1.Pod { return p.pod.DeepCopy() }

// UID sets the pod's UID, which the apiserver sets on create (for fake clients and plans).
func (p *PodWrapper) UID(uid string) *PodWrapper {
	p.pod.UID = types.UID(uid)
	return p
}

// Label adds a label.
func (p *PodWrapper) Label(key, value string) *PodWrapper {
	if p.pod.Labels == nil {
		p.pod.Labels = map[string]string{}
	}
	p.pod.Labels[key] = value
	return p
}

// Labels adds every label of m.
func (p *PodWrapper) Labels(m map[string]string) *PodWrapper {
	for k, v := range m {
		p.Label(k, v)
	}
	return p
}

// Annotation adds an annotation.
func (p *PodWrapper) Annotation(key, value string) *PodWrapper {
	if p.pod.Annotations == nil {
		p.pod.Annotations = map[string]string{}
	}
	p.pod.Annotations[key] = value
	return p
}

// Annotations adds every annotation of m.
func (p *PodWrapper) Annotations(m map[string]string) *PodWrapper {
	for k, v := range m {
		p.Annotation(k, v)
	}
	return p
}

// Node binds the pod to Kubernetes node name, as the scheduler would.
func (p *PodWrapper) Node(name string) *PodWrapper {
	p.pod.Spec.NodeName = name
	return p
}

// Containers adds app containers of DefaultImage.
func (p *PodWrapper) Containers(names ...string) *PodWrapper {
	for _, n := range names {
		p.pod.Spec.Containers = append(p.pod.Spec.Containers, corev1.Container{Name: n, Image: DefaultImage})
	}
	return p
}

// Image sets the image of every container added so far.
func (p *PodWrapper) Image(image string) *PodWrapper {
	for i := range p.pod.Spec.Containers {
		p.pod.Spec.Containers[i].Image = image
	}
	return p
}

// ServiceAccount runs the pod as service account name.
func (p *PodWrapper) ServiceAccount(name string) *PodWrapper {
	p.pod.Spec.ServiceAccountName = name
	return p
}

// NoServiceAccountToken keeps the service account token out of the pod.
func (p *PodWrapper) NoServiceAccountToken() *PodWrapper {
	f := false
	p.pod.Spec.AutomountServiceAccountToken = &f
	return p
}

// Terminating marks the pod as being deleted since at.
func (p *PodWrapper) Terminating(at metav1.Time) *PodWrapper {
	p.pod.DeletionTimestamp = &at
	return p
}

// Running gives the pod the status of Running (see MarkRunning); set its UID first.
func (p *PodWrapper) Running() *PodWrapper {
	MarkRunning(&p.pod)
	return p
}

// MarkRunning sets the status a kubelet reports once every container of pod runs: phase
// Running, each container running and ready, with the ID ContainerID gives it. The IDs
// come from the pod's UID: call it on the pod the apiserver returned from create.
func MarkRunning(pod *corev1.Pod) {
	now := metav1.Now()
	pod.Status.Phase = corev1.PodRunning
	pod.Status.ContainerStatuses = nil
	for _, c := range pod.Spec.Containers {
		started := true
		pod.Status.ContainerStatuses = append(pod.Status.ContainerStatuses, corev1.ContainerStatus{
			Name: c.Name, Image: c.Image, ContainerID: ContainerID(pod, c.Name), Ready: true, Started: &started,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}},
		})
	}
}

// ContainerID is a stable 64-hex containerd ID for container of pod, as the runtime
// reports it ("containerd://<id>").
func ContainerID(pod *corev1.Pod, container string) string {
	return fmt.Sprintf("containerd://%x", sha256.Sum256([]byte(string(pod.UID)+"/"+container)))
}

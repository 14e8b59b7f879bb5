//go:build integration

package controllers

import (
	"context"
	"crypto/sha256"
	"fmt"
	"maps"
	"sync"
	"sync/atomic"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/ptr"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
	"github.com/numapref/numapref/internal/nodeagent"
)

// scriptedEngine stands in for the apply engine where a spec is about the controllers:
// it records the desired state it is given and answers with scripted results. The engine
// itself is tested against real processes, cgroups and the emulator in internal/nodeagent
// and in the real-engine specs of this suite.
type scriptedEngine struct {
	mu      sync.Mutex
	desires map[nodeagent.ContainerKey]nodeagent.Desire
	outcome func(nodeagent.Desire) nodeagent.ContainerResult
	changes chan struct{}
	calls   atomic.Int32
}

func newScriptedEngine(outcome func(nodeagent.Desire) nodeagent.ContainerResult) *scriptedEngine {
	if outcome == nil {
		outcome = appliedWithTasks(3)
	}
	return &scriptedEngine{desires: map[nodeagent.ContainerKey]nodeagent.Desire{}, outcome: outcome, changes: make(chan struct{}, 1)}
}

// appliedWithTasks applies every desire that is not skipped, to n tasks.
func appliedWithTasks(n int) func(nodeagent.Desire) nodeagent.ContainerResult {
	return func(d nodeagent.Desire) nodeagent.ContainerResult {
		if d.Refusal != "" {
			return nodeagent.ContainerResult{Desire: d, Reason: d.Refusal, Message: d.Message}
		}
		return nodeagent.ContainerResult{Desire: d, Reason: numav1.ReasonApplied, Tasks: n}
	}
}

func (e *scriptedEngine) SetDesired(ds []nodeagent.Desire) {
	e.calls.Add(1)
	m := map[nodeagent.ContainerKey]nodeagent.Desire{}
	for _, d := range ds {
		m[d.Key()] = d
	}
	e.mu.Lock()
	changed := !maps.Equal(m, e.desires)
	e.desires = m
	e.mu.Unlock()
	if changed {
		select {
		case e.changes <- struct{}{}:
		default:
		}
	}
}

func (e *scriptedEngine) Results() map[nodeagent.ContainerKey]nodeagent.ContainerResult {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := map[nodeagent.ContainerKey]nodeagent.ContainerResult{}
	for k, d := range e.desires {
		out[k] = e.outcome(d)
	}
	return out
}

func (e *scriptedEngine) Changes() <-chan struct{} { return e.changes }

// Desired returns the desire for a container, if any.
func (e *scriptedEngine) Desired(pod *corev1.Pod, container string) (nodeagent.Desire, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	d, ok := e.desires[nodeagent.ContainerKey{PodUID: pod.UID, Container: container}]
	return d, ok
}

func newNamespace(ctx context.Context) string {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "t-" + rand.String(6)}}
	Expect(k8sClient.Create(ctx, ns)).To(Succeed())
	return ns.Name
}

func newPreference(ns, name string, node int32, selector map[string]string) *numav1.NumaPreference {
	return &numav1.NumaPreference{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: numav1.NumaPreferenceSpec{
			Selector: numav1.LabelSelector{MatchLabels: selector},
			Node:     ptr.To(node),
		},
	}
}

// createRunningPod creates a pod bound to node with the given containers and marks them
// running, with container IDs, the way the kubelet would.
func createRunningPod(ctx context.Context, ns, name, node string, labels, annotations map[string]string, containers ...string) *corev1.Pod {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels, Annotations: annotations},
		Spec: corev1.PodSpec{NodeName: node}}
	for _, c := range containers {
		pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: c, Image: "example.invalid/app"})
	}
	Expect(k8sClient.Create(ctx, pod)).To(Succeed())
	for _, c := range containers {
		pod.Status.ContainerStatuses = append(pod.Status.ContainerStatuses, corev1.ContainerStatus{
			Name: c, ContainerID: fakeContainerID(pod, c),
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}},
		})
	}
	Expect(k8sClient.Status().Update(ctx, pod)).To(Succeed())
	return pod
}

func getPreference(ctx context.Context, ns, name string) func(Gomega) *numav1.NumaPreference {
	return func(g Gomega) *numav1.NumaPreference {
		var p numav1.NumaPreference
		g.Expect(k8sClient.Get(ctx, keyOf(ns, name), &p)).To(Succeed())
		return &p
	}
}

func condition(p *numav1.NumaPreference, t string) metav1.Condition {
	for _, c := range p.Status.Conditions {
		if c.Type == t {
			return c
		}
	}
	return metav1.Condition{}
}

func keyOf(ns, name string) types.NamespacedName {
	return types.NamespacedName{Namespace: ns, Name: name}
}

// fakeContainerID makes a stable 64-hex container ID, as containerd reports it.
func fakeContainerID(pod *corev1.Pod, container string) string {
	return fmt.Sprintf("containerd://%x", sha256.Sum256([]byte(string(pod.UID)+"/"+container)))
}

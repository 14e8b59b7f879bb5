// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"maps"
	"sync"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
	"github.com/numapref/numapref/internal/nodeagent/desire"
	"github.com/numapref/numapref/internal/nodeagent/plan"
)

// scriptedEngine stands in for the apply engine where a spec is about the controllers:
// it records the desired state it is given and answers with scripted results. The engine
// itself is tested against real processes, cgroups and the emulator in internal/nodeagent
// and in the real-engine specs of this suite.
type scriptedEngine struct {
	mu      sync.Mutex
	desires map[desire.ContainerKey]desire.Desire
	outcome func(desire.Desire) plan.Result
	changes chan struct{}
	calls   atomic.Int32
}

func newScriptedEngine(outcome func(desire.Desire) plan.Result) *scriptedEngine {
	if outcome == nil {
		outcome = appliedWithTasks(3)
	}
	return &scriptedEngine{desires: map[desire.ContainerKey]desire.Desire{}, outcome: outcome, changes: make(chan struct{}, 1)}
}

// appliedWithTasks applies every desire that is not skipped, to n tasks.
func appliedWithTasks(n int) func(desire.Desire) plan.Result {
	return func(d desire.Desire) plan.Result {
		if d.Refusal != "" {
			return plan.Result{Desire: d, Reason: d.Refusal, Message: d.Message}
		}
		return plan.Result{Desire: d, Reason: numav1.ReasonApplied, Tasks: n}
	}
}

func (e *scriptedEngine) SetDesired(ds []desire.Desire) {
	e.calls.Add(1)
	m := map[desire.ContainerKey]desire.Desire{}
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

func (e *scriptedEngine) Results() map[desire.ContainerKey]plan.Result {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := map[desire.ContainerKey]plan.Result{}
	for k, d := range e.desires {
		out[k] = e.outcome(d)
	}
	return out
}

func (e *scriptedEngine) Changes() <-chan struct{} { return e.changes }

// Desired returns the desire for a container, if any.
func (e *scriptedEngine) Desired(pod *corev1.Pod, container string) (desire.Desire, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	d, ok := e.desires[desire.ContainerKey{PodUID: pod.UID, Container: container}]
	return d, ok
}

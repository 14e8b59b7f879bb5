// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package nodeagent

import (
	"time"

	"github.com/numapref/numapref/internal/nodeagent/desire"
	"github.com/numapref/numapref/internal/nodeagent/plan"
)

// DefaultStartGrace is how long a desire learnt at a container's start counts while the
// API does not report the container running: the kubelet posts a new container's status
// within seconds, or, with many starts at once, tens of seconds.
const DefaultStartGrace = 2 * time.Minute

// PlaceAtStart places a container the runtime is about to start (NRI's StartContainer:
// internal/nodeagent/nri), before the API reports it running. d is its desire
// (desire.PlanStart), whose Ref names the container the runtime starts. At once a
// one-container pass sets its tasks (at the start: the init, whose thread execs the
// program and keeps the node across exec), the ledger written ahead as ever. The desire
// counts until the API's desired state holds the same container (its Ref.ContainerID) or
// for StartGrace of the API answering (SetAPIReachable), whichever comes first: from then
// on the API's desired state alone rules, and a container it does not select is undone. ok
// is false when the engine did nothing: before it is synced (the first desired state, the
// API's or the persisted one) and once draining.
func (e *Engine) PlaceAtStart(d desire.Desire) (r plan.Result, ok bool) {
	if !e.desires.start(d) {
		return plan.Result{}, false
	}
	defer e.desires.started(d.Key())
	e.devices.await(d)
	return e.startPass(d.Key())
}

// SetAPIReachable tells the engine whether the API server answers the agent. While it
// does not, the agent's cache stands still and cannot confirm any start, so no start
// lapses: a container placed at its start during an outage stays placed through it. When
// the API answers again, each start's grace begins anew, for the kubelet to post the
// statuses it could not.
func (e *Engine) SetAPIReachable(reachable bool) { e.desires.setReachable(reachable) }

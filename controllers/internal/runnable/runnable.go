// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

// Package runnable holds what the agent's and the summarizer's controllers share about
// running in a manager: which runnables wait for the leader election, and how long a
// controller waits for its caches.
package runnable

import (
	"context"
	"time"
)

// CacheSyncPatience is how long the controllers wait for their caches to sync: as long as
// it takes. Node-local work goes on meanwhile (the engine enforces the desired state it
// persisted), so an agent that cannot reach the API must not exit.
const CacheSyncPatience = 100 * 365 * 24 * time.Hour

// NodeLocal is node-local work: it runs on every agent, never behind leader election.
type NodeLocal func(context.Context) error

func (f NodeLocal) Start(ctx context.Context) error { return f(ctx) }
func (NodeLocal) NeedLeaderElection() bool          { return false }

// LeaderOnly is a runnable that runs on the elected instance only.
type LeaderOnly func(context.Context) error

func (f LeaderOnly) Start(ctx context.Context) error { return f(ctx) }
func (LeaderOnly) NeedLeaderElection() bool          { return true }

// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/numapref/numapref/internal/fsutil"
	"github.com/numapref/numapref/internal/statedir"
)

// lockWaitReport is how often an agent waiting for its state dir says so again.
const lockWaitReport = 30 * time.Second

// holdStateDir creates the state dir and takes its lock, waiting while another agent holds
// it (statedir.Dir.Hold): two agents on one dir would overwrite each other's ledger, and
// what the first one set would never be undone (a rolling update with a surge, two
// releases, kustomize beside the chart). While it waits the agent runs no pass, and answers
// its health probes: a surge update deletes the old pod only once the new one is ready,
// and the old pod's exit releases the lock (the kernel releases a flock when its holder
// dies, SIGKILL too).
func holdStateDir(ctx context.Context, f *agentFlags) (*fsutil.Lock, error) {
	dir := statedir.New(f.stateDir)
	log := ctrl.Log.WithName("agent").WithValues("stateDir", dir.Path())
	var stop func()
	waiting := func(holder int, waited time.Duration) {
		if stop == nil {
			stop = serveProbes(f.probeAddr)
		}
		log.Info("Waiting for the state dir: another agent holds it; no pass runs until it exits",
			"holderPID", holder, "waited", waited.Round(time.Second).String())
	}
	lock, err := dir.Hold(ctx, fsutil.WaitOptions{Report: lockWaitReport, Waiting: waiting})
	if stop != nil {
		stop()
	}
	if err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	log.Info("Holding the state dir", "lock", dir.Lock())
	return lock, nil
}

// adoptState moves the state files of an earlier version's state dir from into stateDir,
// under stateDir's lock, when stateDir has no ledger yet: an upgrade from a release whose
// agents kept their state in the shared /var/lib/numapref then still undoes what they set.
// The first agent to hold its lock takes them; "" adopts nothing. While an agent still runs
// on from, it refuses (statedir.Dir.Adopt): the agent exits, and its restart adopts once
// that agent is gone.
func adoptState(from, stateDir string) error {
	adopted, err := statedir.New(stateDir).Adopt(statedir.New(from))
	for _, name := range adopted {
		ctrl.Log.WithName("agent").Info("Adopted an earlier version's state file", "file", name, "from", from)
	}
	if err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	return nil
}

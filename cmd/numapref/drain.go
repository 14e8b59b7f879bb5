// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/numapref/numapref/controllers/agent"
	"github.com/numapref/numapref/internal/nodeagent"
	"github.com/numapref/numapref/internal/statedir"
)

// setupDrain has the agent undo everything and remove its state when its DaemonSet is
// deleted (agent.SetupDrain). Without its pod's name it never drains.
func setupDrain(mgr ctrl.Manager, f *agentFlags, engine *nodeagent.Engine) error {
	log := ctrl.Log.WithName("agent")
	if f.podName == "" || f.podNamespace == "" {
		log.Info("No -pod-name or -pod-namespace (POD_NAME, POD_NAMESPACE): uninstalling numapref will not undo what this agent set")
		return nil
	}
	return agent.SetupDrain(mgr, engine, agent.DrainOptions{
		Pod:     types.NamespacedName{Namespace: f.podNamespace, Name: f.podName},
		Node:    f.nodeName,
		Drained: func() { removeState(f.stateDir) },
	})
}

// removeState removes the agent's state dir once a drain left nothing to undo
// (statedir.Dir.Remove). The lock stays held on the removed file: this agent writes
// nothing more, and an agent that starts meanwhile locks a new file.
func removeState(dir string) {
	log := ctrl.Log.WithName("agent").WithValues("stateDir", dir)
	if err := statedir.New(dir).Remove(); err != nil {
		log.Error(err, "Removing the state dir after the drain")
		return
	}
	log.Info("Removed the state dir")
}

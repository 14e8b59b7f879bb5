// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	ctrl "sigs.k8s.io/controller-runtime"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/numapref/numapref/controllers/agent"
	"github.com/numapref/numapref/internal/metrics"
	"github.com/numapref/numapref/internal/nodeagent/devices"
	"github.com/numapref/numapref/internal/nodeagent/devices/podresources"
)

// agentDevices is what mode FollowDevices reads: the kubelet's PodResources socket, and,
// for DRA devices, the API (bound once the manager, whose API reader it uses, exists).
type agentDevices struct {
	reader  devices.Reader // nil without -pod-resources-socket
	metrics *metrics.Devices
	dra     *lateDRA
}

// openDevices makes the PodResources client of -pod-resources-socket and registers the
// metrics of its calls. The socket is dialled lazily: an absent one is a reason on the
// FollowDevices containers, not an error of the agent.
func openDevices(f *agentFlags) (agentDevices, error) {
	m := metrics.NewDevices()
	if err := m.Register(ctrlmetrics.Registry); err != nil {
		return agentDevices{}, fmt.Errorf("agent: registering device metrics: %w", err)
	}
	out := agentDevices{metrics: m, dra: &lateDRA{}}
	if f.podResourcesSocket == "" {
		return out, nil
	}
	c, err := podresources.New(f.podResourcesSocket, out.dra, m)
	if err != nil {
		return agentDevices{}, fmt.Errorf("agent: %w", err)
	}
	out.reader = c
	ctrl.Log.WithName("agent").Info("FollowDevices reads the kubelet's PodResources", "socket", f.podResourcesSocket,
		"timeout", f.podResourcesTimeout, "draNUMAAttributes", f.draNUMAAttributes)
	return out, nil
}

// lateDRA is a podresources.DRA whose resolver is bound after the engine is made.
type lateDRA struct {
	t atomic.Pointer[agent.DRATopology]
}

func (l *lateDRA) bind(t *agent.DRATopology) { l.t.Store(t) }

func (l *lateDRA) Resolve(ctx context.Context, ds []devices.Device) error {
	t := l.t.Load()
	if t == nil {
		return errors.New("the agent's API client is not made yet")
	}
	return t.Resolve(ctx, ds)
}

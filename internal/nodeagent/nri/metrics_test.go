// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package nri

import (
	"strings"
	"testing"

	"github.com/containerd/nri/pkg/api"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/numapref/numapref/internal/testutil/nriruntime"
	"github.com/numapref/numapref/internal/testutil/poll"
)

// The collector reports what the plugin did: connected while registered, its starts, and
// a lost connection.
func TestCollector(t *testing.T) {
	r := nriruntime.Start(t)
	got := make(placements, 1)
	p := startPlugin(t, r.Socket, got)
	r.WaitPlugin()
	if err := r.StartContainer(testPod(), testContainer("app", 1, api.ContainerState_CONTAINER_CREATED)); err != nil {
		t.Fatal(err)
	}
	got.next(t)
	c := NewCollector(p.Plugin)
	want := func(connected, disconnects string) string {
		return `
# HELP numapref_nri_connected 1 while the agent is registered with the container runtime as an NRI plugin (--nri-socket), else 0.
# TYPE numapref_nri_connected gauge
numapref_nri_connected ` + connected + `
# HELP numapref_nri_connects_total Registrations with the container runtime's NRI that completed (the first, and one after each runtime restart).
# TYPE numapref_nri_connects_total counter
numapref_nri_connects_total 1
# HELP numapref_nri_container_creates_total Containers the runtime handed to the agent as it created them (CreateContainer).
# TYPE numapref_nri_container_creates_total counter
numapref_nri_container_creates_total 0
# HELP numapref_nri_container_starts_total Containers the runtime handed to the agent as it started them (StartContainer).
# TYPE numapref_nri_container_starts_total counter
numapref_nri_container_starts_total 1
# HELP numapref_nri_disconnects_total NRI connections lost after registration (a runtime restart, or a plugin the runtime dropped).
# TYPE numapref_nri_disconnects_total counter
numapref_nri_disconnects_total ` + disconnects + `
# HELP numapref_nri_late_placements_total Placements at a container's start that had not returned by their deadline: the runtime got its answer without them.
# TYPE numapref_nri_late_placements_total counter
numapref_nri_late_placements_total 0
# HELP numapref_nri_memory_policies_total Containers the agent asked the runtime to create with a memory policy on their home (CreateContainer's linux.memoryPolicy).
# TYPE numapref_nri_memory_policies_total counter
numapref_nri_memory_policies_total 0
# HELP numapref_nri_placer_panics_total Placements at a container's start that panicked: the runtime got its answer, the agent kept running, and the container is placed once the API reports it running.
# TYPE numapref_nri_placer_panics_total counter
numapref_nri_placer_panics_total 0
`
	}
	if err := testutil.CollectAndCompare(c, strings.NewReader(want("1", "0"))); err != nil {
		t.Error(err)
	}
	r.Stop()
	poll.True(t, wait, "the plugin sees the runtime gone", func() bool { return !p.Connected() && p.Stats().Disconnects == 1 })
	if err := testutil.CollectAndCompare(c, strings.NewReader(want("0", "1"))); err != nil {
		t.Error(err)
	}
}

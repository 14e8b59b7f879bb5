// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package nri

import (
	"context"
	"testing"
	"time"

	"github.com/containerd/nri/pkg/api"

	"github.com/numapref/numapref/internal/numa"
	"github.com/numapref/numapref/internal/numa/mempolicy"
	"github.com/numapref/numapref/internal/testutil/nriruntime"
)

// policyPlacer answers every creation with policy (nil: none), after delay.
type policyPlacer struct {
	policy *mempolicy.OCIPolicy
	delay  time.Duration
	got    chan Start
}

func (policyPlacer) PlaceAtStart(context.Context, Start) {}

func (p policyPlacer) PolicyAtCreation(_ context.Context, s Start) *mempolicy.OCIPolicy {
	p.got <- s
	time.Sleep(p.delay) // ignores ctx, as a stuck placer would
	return p.policy
}

// The runtime's CreateContainer (nri's own adaptation) gets the placer's memory policy as
// the container's adjustment, in NRI's enums, which the adaptation accepts and hands to
// the runtime to write into the OCI spec; an unselected container gets no adjustment;
// a placer past its deadline costs the runtime no more than the deadline and gives none.
func TestCreateContainerGivesTheMemoryPolicy(t *testing.T) {
	balancing, err := mempolicy.PreferredMany(numa.NewNodeMask(1), true).OCI()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		pol   *mempolicy.OCIPolicy
		delay time.Duration
		want  *api.LinuxMemoryPolicy
	}{
		{name: "selected", pol: &balancing, want: &api.LinuxMemoryPolicy{Mode: api.MpolMode_MPOL_PREFERRED_MANY, Nodes: "1",
			Flags: []api.MpolFlag{api.MpolFlag_MPOL_F_NUMA_BALANCING}}},
		{name: "unselected"},
		{name: "late", pol: &balancing, delay: 500 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := nriruntime.Start(t)
			pp := policyPlacer{policy: tc.pol, delay: tc.delay, got: make(chan Start, 1)}
			p := startPlugin(t, r.Socket, pp, func(c *Config) { c.RequestTimeout = 100 * time.Millisecond })
			r.WaitPlugin()
			ctr := testContainer("app", 0, api.ContainerState_CONTAINER_CREATED)
			adj, err := r.CreateContainer(testPod(), ctr)
			if err != nil {
				t.Fatalf("the runtime's CreateContainer: %v", err)
			}
			if s := <-pp.got; s.Container != "app" || s.CpusetCPUs != ctr.GetLinux().GetResources().GetCpu().GetCpus() {
				t.Errorf("the placer got %+v", s)
			}
			got := adj.GetLinux().GetMemoryPolicy()
			switch {
			case tc.want == nil && got != nil:
				t.Errorf("memory policy adjustment %v, want none", got)
			case tc.want != nil && (got == nil || got.Mode != tc.want.Mode || got.Nodes != tc.want.Nodes || len(got.Flags) != 1 || got.Flags[0] != tc.want.Flags[0]):
				t.Errorf("memory policy adjustment %v, want %v", got, tc.want)
			}
			wantPolicies := uint64(0)
			if tc.want != nil {
				wantPolicies = 1
			}
			if s := p.Stats(); s.Creates != 1 || s.Policies != wantPolicies {
				t.Errorf("Stats() = %+v, want 1 creation, %d policies", s, wantPolicies)
			}
		})
	}
}

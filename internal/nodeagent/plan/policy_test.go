// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package plan

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
	"github.com/numapref/numapref/internal/cpuset"
	"github.com/numapref/numapref/internal/nodeagent/cgroups"
	"github.com/numapref/numapref/internal/nodeagent/desire"
	"github.com/numapref/numapref/internal/nodeagent/known"
	"github.com/numapref/numapref/internal/numa"
	"github.com/numapref/numapref/internal/numa/mempolicy"
)

// The kernels' answers to mempolicy.Probe: Linux 6.10 and later, 5.15 to 6.9, and one
// without memory policies.
var (
	balancingKernel = mempolicy.Support{Preferred: true, PreferredMany: true, PreferredManyBalancing: true}
	olderKernel     = mempolicy.Support{Preferred: true, PreferredMany: true}
	noPolicyKernel  = mempolicy.Support{Node: -1}
)

// A container being created gets the home the decision function gives every pass, as the
// policy the kernel takes: MPOL_PREFERRED_MANY with balancing where it can, MPOL_PREFERRED
// else; and no policy, with the reason, where the home is offline, the request's
// cpuset.mems pins it elsewhere, or the kernel takes none. Nothing of the host is read
// for it: its cgroup does not exist yet.
func TestAtCreationStatic(t *testing.T) {
	for _, tc := range []struct {
		name     string
		node     int
		mems     []int
		policies mempolicy.Support
		prctl    bool
		reason   string
		policy   string
	}{
		{name: "balancing kernel", node: 1, policies: balancingKernel, reason: numav1.ReasonApplied, policy: "prefer (many)=balancing:1"},
		{name: "older kernel", node: 1, policies: olderKernel, reason: numav1.ReasonApplied, policy: "prefer:1"},
		{name: "beside the prctl", node: 0, policies: balancingKernel, prctl: true, reason: numav1.ReasonApplied, policy: "prefer (many)=balancing:0"},
		{name: "mems allow it", node: 1, mems: []int{0, 1}, policies: olderKernel, reason: numav1.ReasonApplied, policy: "prefer:1"},
		{name: "mems pin elsewhere", node: 1, mems: []int{0}, policies: olderKernel, reason: numav1.ReasonMemoryPinnedElsewhere},
		{name: "offline node", node: 3, policies: olderKernel, reason: numav1.ReasonNodeNotPresent},
		{name: "no memory policies", node: 1, policies: noPolicyKernel, reason: numav1.ReasonMemoryPolicyUnsupported},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := mainWant
			d.Node, d.MemoryPolicy = tc.node, numav1.MemoryPolicyAtCreation
			in := Input{Desired: map[desire.ContainerKey]desire.Desire{mainKey: d}, Known: known.NewView(nil),
				Topology: NewTopology([]int{0, 1}, nil), Cgroups: unreadableHost{t}, ProcRoot: "/nonexistent",
				Support: numa.Support{Supported: tc.prctl}, Policies: tc.policies}
			pl, p := AtCreation(in, Creation{Key: mainKey, Cpuset: cpuset.Cpuset{Mems: tc.mems}})
			if len(pl.Containers) != 1 {
				t.Fatalf("plan of %d containers, want 1", len(pl.Containers))
			}
			r := pl.Containers[0].Result
			if r.Reason != tc.reason {
				t.Fatalf("reason %s (%s), want %s", r.Reason, r.Message, tc.reason)
			}
			if tc.reason != numav1.ReasonApplied {
				if r.Message == "" || !p.Equal(mempolicy.Policy{}) {
					t.Errorf("no home: message %q, policy %s; want a message and no policy", r.Message, p)
				}
				return
			}
			if p.String() != tc.policy || r.Policy != tc.policy || r.Mechanism != MechanismMemoryPolicy || r.Node != tc.node {
				t.Errorf("policy %s, result %s by %q on node %d; want %s by %s on node %d", p, r.Policy, r.Mechanism, r.Node, tc.policy, MechanismMemoryPolicy, tc.node)
			}
			if pc := pl.Containers[0]; pc.Listing != nil || pc.Entry != nil || len(pc.Sets) > 0 {
				t.Errorf("a creation plan listed, wrote or SET: %+v", pc)
			}
		})
	}
}

// unreadableHost fails the test on any read of the host: a creation reads only its
// request.
type unreadableHost struct{ t *testing.T }

func (h unreadableHost) Resolve(ref cgroups.ContainerRef) (*cgroups.Container, error) {
	h.t.Errorf("resolved %+v on the host", ref)
	return nil, errors.New("unreadable")
}

func (h unreadableHost) ListTIDs(*cgroups.Container) ([]cgroups.TaskRef, error) {
	h.t.Error("listed tasks on the host")
	return nil, errors.New("unreadable")
}

func (h unreadableHost) Cpuset(*cgroups.Container) (cpuset.Cpuset, error) {
	h.t.Error("read a cpuset on the host")
	return cpuset.Cpuset{}, errors.New("unreadable")
}

// The automatic modes decide at creation as at every pass, from the request's cpuset: a
// Spread pod's choice is made there and handed back to be kept, FollowCPUs follows the
// CPUs the runtime will give, and works without the prctl.
func TestAtCreationAutomatic(t *testing.T) {
	c := newChooser(t, twoNodes, cpusetHost{"a": {}}, nil)
	c.in.Support = numa.Support{} // no prctl: the policy is all there is
	c.in.Policies = olderKernel

	a, b := spreadPod("a", 1000, ""), spreadPod("b", 1000, "")
	c.in.Desired = desireMap(a, b) // a runs already; b is being created
	pl, p := AtCreation(c.in, Creation{Key: b.Key()})
	r := pl.Containers[0].Result
	if r.Reason != numav1.ReasonApplied || !pl.Resolved || !pl.ChoicesChanged {
		t.Fatalf("Spread at creation: %s (%s), resolved %v, changed %v; want Applied with new choices", r.Reason, r.Message, pl.Resolved, pl.ChoicesChanged)
	}
	nodeA := pl.Choices[ChoiceKey{PodUID: a.PodUID, Group: a.Placement.Group}].Node
	if r.Node == nodeA || !p.Equal(mempolicy.Preferred(r.Node)) {
		t.Errorf("b got node %d (policy %s), a node %d; want b spread to the other node", r.Node, p, nodeA)
	}

	f := desire.Desire{PodUID: "uid-f", Container: "main", Node: numa.NoNode, Ref: cgroups.ContainerRef{PodUID: "uid-f", ContainerID: "f"},
		Placement: desire.Placement{Mode: numav1.PlacementModeFollowCPUs}}
	c.in.Desired = desireMap(f)
	pl, p = AtCreation(c.in, Creation{Key: f.Key(), Cpuset: cpuset.Cpuset{CPUs: []int{2, 3}}})
	if r := pl.Containers[0].Result; r.Reason != numav1.ReasonApplied || r.Node != 1 || p.String() != "prefer:1" {
		t.Errorf("FollowCPUs on CPUs 2-3 at creation: %s (%s) node %d policy %s; want Applied on node 1, prefer:1", r.Reason, r.Message, r.Node, p)
	}
	pl, _ = AtCreation(c.in, Creation{Key: f.Key()})
	if r := pl.Containers[0].Result; r.Reason != numav1.ReasonCPUsNotPinned {
		t.Errorf("FollowCPUs with no cpuset at creation: %s, want %s", r.Reason, numav1.ReasonCPUsNotPinned)
	}
}

// Without the prctl a running container's home is its memory policy, read from its init's
// numa_maps: Applied when it holds the home's, and else a reason that says why it has
// none: created before it was selected, created by a runtime that ignored the policy it
// was asked for, or no runtime to ask. With the prctl the policy is read and shown only.
func TestCheckPolicy(t *testing.T) {
	for _, tc := range []struct {
		name      string
		maps      string // the init's numa_maps
		asked     bool
		askedNode int  // the node asked for at creation, when asked
		auto      bool // memoryPolicy Auto, not AtCreation
		runtime   bool
		prctl     bool
		reason    string
		mech      string
		policyIs  string
	}{
		{name: "holds it", maps: "prefer:1", runtime: true, reason: numav1.ReasonApplied, mech: MechanismMemoryPolicy, policyIs: "prefer:1"},
		{name: "created before", maps: "default", runtime: true, reason: numav1.ReasonPolicyAtCreationOnly, policyIs: "default"},
		{name: "runtime ignored it", maps: "default", asked: true, askedNode: 1, runtime: true, reason: numav1.ReasonMemoryPolicyUnsupported, policyIs: "default"},
		{name: "no runtime", maps: "default", reason: numav1.ReasonMemoryPolicyUnsupported, policyIs: "default"},
		{name: "no runtime, Auto", auto: true, maps: "default", reason: numav1.ReasonKernelUnsupported, policyIs: ""},
		{name: "another node", maps: "prefer:0", runtime: true, reason: numav1.ReasonPolicyAtCreationOnly, policyIs: "prefer:0"},
		{name: "home changed since its creation", maps: "prefer:0", asked: true, askedNode: 0, runtime: true, reason: numav1.ReasonPolicyAtCreationOnly, policyIs: "prefer:0"},
		{name: "prctl and policy", maps: "prefer:1", runtime: true, prctl: true, reason: numav1.ReasonApplied, mech: MechanismPrctl + "+" + MechanismMemoryPolicy, policyIs: "prefer:1"},
		{name: "prctl alone", maps: "default", runtime: true, prctl: true, reason: numav1.ReasonApplied, mech: MechanismPrctl, policyIs: "default"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newFakeHost(t, map[int]int{100: 1, 101: 1})
			numaMaps := "55d4c0a00000 " + tc.maps + " file=/usr/bin/app mapped=2 N0=2 kernelpagesize_kB=4\n"
			if err := os.WriteFile(filepath.Join(h.proc, "100", "numa_maps"), []byte(numaMaps), 0o644); err != nil {
				t.Fatal(err)
			}
			in := h.input(nil)
			d := mainWant
			d.MemoryPolicy = numav1.MemoryPolicyAtCreation
			if tc.auto {
				d.MemoryPolicy = numav1.MemoryPolicyAuto
			}
			in.Desired[mainKey] = d
			in.Support = numa.Support{Supported: tc.prctl, Reason: "no patch"}
			in.Policies, in.PolicyRuntime = olderKernel, tc.runtime
			in.Asked = func(id string) (mempolicy.Policy, bool) {
				return mempolicy.Preferred(tc.askedNode), tc.asked && desire.SameContainer(id, mainRef.ContainerID)
			}
			cp := Full(in).Containers[0]
			r := cp.Result
			if r.Reason != tc.reason || r.Mechanism != tc.mech || r.Policy != tc.policyIs {
				t.Fatalf("%s (%s) by %q, policy %q; want %s by %q, policy %q", r.Reason, r.Message, r.Mechanism, r.Policy, tc.reason, tc.mech, tc.policyIs)
			}
			if !tc.prctl {
				if len(cp.Sets) > 0 || cp.Entry != nil {
					t.Errorf("without the prctl the plan SETs %d tasks, writes %v", len(cp.Sets), cp.Entry)
				}
				if tc.reason == numav1.ReasonApplied && r.Tasks != 2 {
					t.Errorf("tasks %d, want the 2 that inherited the policy", r.Tasks)
				}
			}
		})
	}
}

// Never keeps a node without the prctl as it was: KernelUnsupported, no policy read.
func TestPolicyOffWithoutPrctl(t *testing.T) {
	h := newFakeHost(t, map[int]int{100: 1})
	in := h.input(nil)
	d := mainWant
	d.MemoryPolicy = numav1.MemoryPolicyNever
	in.Desired[mainKey] = d
	in.Support, in.Policies, in.PolicyRuntime = numa.Support{Reason: "no patch"}, olderKernel, true
	if r := Full(in).Containers[0].Result; r.Reason != numav1.ReasonKernelUnsupported || r.Policy != "" {
		t.Errorf("%s, policy %q; want %s and no policy read", r.Reason, r.Policy, numav1.ReasonKernelUnsupported)
	}
}

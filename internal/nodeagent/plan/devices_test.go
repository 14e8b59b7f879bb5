// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package plan

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/types"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
	"github.com/numapref/numapref/internal/nodeagent/cgroups"
	"github.com/numapref/numapref/internal/nodeagent/desire"
	"github.com/numapref/numapref/internal/nodeagent/devices"
	"github.com/numapref/numapref/internal/numa"
	"github.com/numapref/numapref/internal/numa/mempolicy"
)

// devicesPod is pod name's container main in FollowDevices, allowed on allowed ("" for
// every node), following filter.
func devicesPod(name, allowed string, filter desire.DeviceFilter) desire.Desire {
	return desire.Desire{Pod: types.NamespacedName{Namespace: "ns", Name: name}, PodUID: types.UID("uid-" + name), Container: "main",
		Node: numa.NoNode, Ref: cgroups.ContainerRef{PodUID: "uid-" + name, ContainerID: name},
		Placement: desire.Placement{Mode: numav1.PlacementModeFollowDevices, Group: "NumaPreference ns/gpu", Allowed: allowed, Devices: filter}}
}

func gpu(id string, nodes ...int) devices.Device {
	return devices.Device{ResourceName: "example.com/gpu", ID: id, Nodes: nodes}
}

func nic(id string, nodes ...int) devices.Device {
	return devices.Device{Driver: "nic.example.com", Pool: "node-a", DeviceClassName: "nic.example.com", Claim: "ns/c", ID: id, Nodes: nodes}
}

// allocations answers plan.Input's Devices from a table by pod name.
func allocations(m map[string]devices.Allocation) func(desire.ContainerKey, desire.Desire) devices.Allocation {
	return func(_ desire.ContainerKey, d desire.Desire) devices.Allocation { return m[d.Pod.Name] }
}

func read(ds ...devices.Device) devices.Allocation {
	return devices.Allocation{State: devices.Read, Devices: ds}
}

// The rule, container by container: one node when every device is on it; the node with
// the most devices, then the lowest id, when they span; a reason, never a guess, for no
// device, a device without a node, one on a node the host lacks, devices on no allowed
// node, and an answer awaited or not had.
func TestFollowDevices(t *testing.T) {
	for name, tc := range map[string]struct {
		topo    topo
		allowed string
		filter  desire.DeviceFilter
		mems    []int
		alloc   devices.Allocation
		want    string // the node, or the skip reason
		policy  []int  // the memory policy's nodes when a set
	}{
		"one device on node 1":                 {topo: twoNodes, alloc: read(gpu("g0", 1)), want: "1"},
		"every device on node 2":               {topo: fourNodes, alloc: read(gpu("g0", 2), gpu("g1", 2), nic("n0", 2)), want: "2"},
		"the most devices win":                 {topo: fourNodes, alloc: read(gpu("g0", 3), gpu("g1", 1), nic("n0", 1)), want: "1"},
		"a tie goes to the lowest id":          {topo: fourNodes, alloc: read(gpu("g0", 3), gpu("g1", 2)), want: "2"},
		"a device on two nodes counts on both": {topo: twoNodes, alloc: read(gpu("g0", 0, 1), gpu("g1", 1)), want: "1"},
		"a set spec.nodes allows": {topo: fourNodes, allowed: "1-3", alloc: read(gpu("g0", 3), gpu("g1", 1), gpu("g2", 1)),
			want: "1", policy: []int{1, 3}},
		"spec.nodes leaves out the most": {topo: fourNodes, allowed: "3", alloc: read(gpu("g0", 3), gpu("g1", 1), gpu("g2", 1)), want: "3"},
		"cpuset.mems leaves out the most": {topo: fourNodes, mems: []int{0, 3}, alloc: read(gpu("g0", 3), gpu("g1", 1), gpu("g2", 1)),
			want: "3"},
		"devices on no allowed node": {topo: fourNodes, allowed: "0,2", alloc: read(gpu("g0", 3)), want: numav1.ReasonDevicesOnOtherNodes},
		"devices outside cpuset.mems": {topo: twoNodes, mems: []int{0}, alloc: read(gpu("g0", 1)),
			want: numav1.ReasonDevicesOnOtherNodes},
		"the filter picks the NIC": {topo: twoNodes, filter: desire.NewDeviceFilter(nil, []string{"nic.example.com"}),
			alloc: read(gpu("g0", 0), gpu("g1", 0), nic("n0", 1)), want: "1"},
		"the filter picks the GPU": {topo: twoNodes, filter: desire.NewDeviceFilter([]string{"example.com/gpu"}, nil),
			alloc: read(gpu("g0", 0), nic("n0", 1), nic("n1", 1)), want: "0"},
		"no device": {topo: twoNodes, alloc: read(), want: numav1.ReasonNoDevicesAllocated},
		"no device of the kinds followed": {topo: twoNodes, filter: desire.NewDeviceFilter([]string{"example.com/fpga"}, nil),
			alloc: read(gpu("g0", 1)), want: numav1.ReasonNoDevicesAllocated},
		"a device without topology": {topo: twoNodes, alloc: read(gpu("g0", 1), nic("n0")), want: numav1.ReasonDevicesWithoutTopology},
		"one without topology left out": {topo: twoNodes, filter: desire.NewDeviceFilter([]string{"example.com/gpu"}, nil),
			alloc: read(gpu("g0", 1), nic("n0")), want: "1"},
		"a node the host lacks": {topo: twoNodes, alloc: read(gpu("g0", 1), gpu("g1", 5)), want: numav1.ReasonNodeNotPresent},
		"awaited":               {topo: twoNodes, alloc: devices.Allocation{State: devices.Pending}, want: numav1.ReasonDeviceAllocationsPending},
		"unreadable": {topo: twoNodes, alloc: devices.Allocation{State: devices.Unreadable, Err: "no socket"},
			want: numav1.ReasonDeviceAllocationsUnreadable},
	} {
		t.Run(name, func(t *testing.T) {
			d := devicesPod("p", tc.allowed, tc.filter)
			c := newChooser(t, tc.topo, cpusetHost{"p": {Mems: tc.mems}}, nil)
			c.in.Devices = allocations(map[string]devices.Allocation{"p": tc.alloc})
			if got := c.nodesOf(desireMap(d))["p"]; got != tc.want {
				t.Fatalf("got %s (%s), want %s", got, c.resolved.of(d.Key()).message, tc.want)
			}
			if diff := cmp.Diff(tc.policy, c.resolved.of(d.Key()).policyNodes); diff != "" {
				t.Errorf("memory policy nodes (-want +got):\n%s", diff)
			}
		})
	}
}

// The choice is sticky: kept while the kubelet's answer is awaited or cannot be had (an
// agent restarted on its choices file, a kubelet restarting), replaced by an answer that
// says otherwise, dropped when the devices give no node any more and when the container
// leaves.
func TestFollowDevicesIsSticky(t *testing.T) {
	d := devicesPod("p", "", desire.DeviceFilter{})
	host := cpusetHost{"p": {}}
	answers := map[string]devices.Allocation{"p": read(gpu("g0", 1))}
	c := newChooser(t, twoNodes, host, nil)
	c.in.Devices = allocations(answers)
	if got := c.nodesOf(desireMap(d))["p"]; got != "1" {
		t.Fatalf("first pass: %s, want 1", got)
	}
	why := c.resolved.of(d.Key()).why
	if !strings.Contains(why, "FollowDevices: 1 of 1 devices on node 1") {
		t.Errorf("why %q does not say the rule", why)
	}

	again := c.restarted(t, twoNodes, host, nil)
	again.in.Devices = allocations(map[string]devices.Allocation{"p": {State: devices.Pending}})
	if got := again.nodesOf(desireMap(d))["p"]; got != "1" {
		t.Errorf("restarted, the answer awaited: %s, want the kept node 1", got)
	}
	again.in.Devices = allocations(map[string]devices.Allocation{"p": {State: devices.Unreadable, Err: "socket gone"}})
	if got := again.nodesOf(desireMap(d))["p"]; got != "1" {
		t.Errorf("the socket gone: %s, want the kept node 1", got)
	}
	again.in.Devices = allocations(map[string]devices.Allocation{"p": read(gpu("g0", 0))})
	if got := again.nodesOf(desireMap(d))["p"]; got != "0" {
		t.Errorf("an answer on node 0: %s, want 0", got)
	}
	again.in.Devices = allocations(map[string]devices.Allocation{"p": read()})
	if got := again.nodesOf(desireMap(d))["p"]; got != numav1.ReasonNoDevicesAllocated {
		t.Errorf("no device: %s, want %s", got, numav1.ReasonNoDevicesAllocated)
	}
	if len(again.in.Choices) != 0 {
		t.Errorf("choices after no device: %v, want none", again.in.Choices)
	}
	again.in.Devices = allocations(map[string]devices.Allocation{"p": {State: devices.Pending}})
	if got := again.nodesOf(desireMap(d))["p"]; got != numav1.ReasonDeviceAllocationsPending {
		t.Errorf("no choice kept, the answer awaited: %s, want %s", got, numav1.ReasonDeviceAllocationsPending)
	}

	c.nodesOf(desireMap()) // the container left
	if len(c.in.Choices) != 0 {
		t.Errorf("choices after the container left: %v, want none", c.in.Choices)
	}
}

// Two containers of one pod follow their own devices, each with its own choice; another
// mode's pod keeps its own.
func TestFollowDevicesPerContainer(t *testing.T) {
	a := devicesPod("p", "", desire.DeviceFilter{})
	b := a
	b.Container, b.Ref.ContainerID = "side", "p-side"
	s := spreadPod("s", 1000, "")
	c := newChooser(t, twoNodes, cpusetHost{"p": {}, "p-side": {}, "s": {}}, nil)
	c.in.Devices = func(key desire.ContainerKey, _ desire.Desire) devices.Allocation {
		if key.Container == "side" {
			return read(nic("n0", 0))
		}
		return read(gpu("g0", 1))
	}
	c.nodesOf(desireMap(a, b, s))
	if got, want := []int{c.resolved.of(a.Key()).node, c.resolved.of(b.Key()).node}, []int{1, 0}; !cmp.Equal(got, want) {
		t.Errorf("main, side: nodes %v, want %v", got, want)
	}
	if len(c.in.Choices) != 3 {
		t.Errorf("choices %v: want one per FollowDevices container and one for the Spread pod", c.in.Choices)
	}
}

// At creation FollowDevices decides with what is known then: the node of the devices, as
// a memory policy (MPOL_PREFERRED_MANY over the devices' nodes when they span a set
// spec.nodes allows); DeviceAllocationsPending, and no policy, while the kubelet's answer
// is awaited; a later pass of the container alone resolves it again once it is in.
func TestFollowDevicesAtCreation(t *testing.T) {
	c := newChooser(t, fourNodes, cpusetHost{}, nil)
	c.in.Support = numa.Support{}
	c.in.Policies = olderKernel
	d := devicesPod("p", "", desire.DeviceFilter{})
	c.in.Desired = desireMap(d)
	answers := map[string]devices.Allocation{"p": {State: devices.Pending}}
	c.in.Devices = allocations(answers)
	pl, p := AtCreation(c.in, Creation{Key: d.Key()})
	if r := pl.Containers[0].Result; r.Reason != numav1.ReasonDeviceAllocationsPending || p.String() != "default" {
		t.Fatalf("awaited: %s policy %s, want %s and no policy", r.Reason, p, numav1.ReasonDeviceAllocationsPending)
	}
	if !pl.Resolutions.due(d.Key()) {
		t.Error("a waiting container is not due again for a pass of its own")
	}
	answers["p"] = read(gpu("g0", 2))
	c.in.Resolved = pl.Resolutions
	pl, p = AtCreation(c.in, Creation{Key: d.Key()})
	if r := pl.Containers[0].Result; r.Reason != numav1.ReasonApplied || r.Node != 2 || p.String() != "prefer:2" || len(r.Devices) != 1 {
		t.Errorf("read: %s (%s) node %d policy %s devices %v, want Applied on 2, prefer:2, the GPU", r.Reason, r.Message, r.Node, p, r.Devices)
	}

	set := devicesPod("q", "0-3", desire.DeviceFilter{})
	c.in.Desired, c.in.Resolved = desireMap(set), Resolutions{}
	answers["q"] = read(gpu("g0", 3), gpu("g1", 1), gpu("g2", 1))
	pl, p = AtCreation(c.in, Creation{Key: set.Key()})
	if r := pl.Containers[0].Result; r.Node != 1 || p.String() != "prefer (many):1,3" {
		t.Errorf("devices on 1 and 3, spec.nodes 0-3: node %d policy %s, want node 1, prefer (many):1,3", r.Node, p)
	}
	answers["q"] = read(gpu("g0", 3), gpu("g1", 1), gpu("g2", 1))
	c.in.Policies = mempolicy.Support{Preferred: true}
	pl, p = AtCreation(c.in, Creation{Key: set.Key()})
	if r := pl.Containers[0].Result; r.Node != 1 || p.String() != "prefer:1" {
		t.Errorf("no MPOL_PREFERRED_MANY: node %d policy %s, want node 1, prefer:1", r.Node, p)
	}
}

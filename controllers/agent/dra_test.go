// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/utils/ptr"
)

// A DRA device's NUMA node is the first attribute named, in any domain or the driver's
// own, that holds an integer; of a pool only its newest generation counts.
func TestDRANodes(t *testing.T) {
	attr := func(kv map[string]resourcev1.DeviceAttribute) map[resourcev1.QualifiedName]resourcev1.DeviceAttribute {
		out := map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{}
		for k, v := range kv {
			out[resourcev1.QualifiedName(k)] = v
		}
		return out
	}
	num := func(n int64) resourcev1.DeviceAttribute { return resourcev1.DeviceAttribute{IntValue: ptr.To(n)} }
	slice := func(pool string, gen int64, dev string, a map[string]resourcev1.DeviceAttribute) resourcev1.ResourceSlice {
		return resourcev1.ResourceSlice{Spec: resourcev1.ResourceSliceSpec{Pool: resourcev1.ResourcePool{Name: pool, Generation: gen},
			Devices: []resourcev1.Device{{Name: dev, Attributes: attr(a)}}}}
	}
	tp := NewDRATopology(nil, "n", nil)
	for name, tc := range map[string]struct {
		slices []resourcev1.ResourceSlice
		want   []int
	}{
		"a domain's numaNode":          {slices: []resourcev1.ResourceSlice{slice("p", 0, "d", map[string]resourcev1.DeviceAttribute{"gpu.example.com/numaNode": num(1)})}, want: []int{1}},
		"the driver's own numaNode":    {slices: []resourcev1.ResourceSlice{slice("p", 0, "d", map[string]resourcev1.DeviceAttribute{"numaNode": num(2)})}, want: []int{2}},
		"no such attribute":            {slices: []resourcev1.ResourceSlice{slice("p", 0, "d", map[string]resourcev1.DeviceAttribute{"pcieRoot": num(2)})}},
		"a string is not a node":       {slices: []resourcev1.ResourceSlice{slice("p", 0, "d", map[string]resourcev1.DeviceAttribute{"numaNode": {StringValue: ptr.To("1")}})}},
		"another pool's device":        {slices: []resourcev1.ResourceSlice{slice("q", 0, "d", map[string]resourcev1.DeviceAttribute{"numaNode": num(1)})}},
		"the newest generation counts": {slices: []resourcev1.ResourceSlice{slice("p", 2, "d", map[string]resourcev1.DeviceAttribute{"numaNode": num(1)}), slice("p", 1, "d", map[string]resourcev1.DeviceAttribute{"numaNode": num(0)})}, want: []int{1}},
		"the newest, in either order":  {slices: []resourcev1.ResourceSlice{slice("p", 1, "d", map[string]resourcev1.DeviceAttribute{"numaNode": num(0)}), slice("p", 2, "d", map[string]resourcev1.DeviceAttribute{"numaNode": num(1)})}, want: []int{1}},
		"no slice":                     {},
	} {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, tp.nodesOf(tc.slices, "p", "d")); diff != "" {
				t.Errorf("nodes (-want +got):\n%s", diff)
			}
		})
	}
}

// A DRA device's class is its claim request's, or a request alternative's.
func TestDRAClass(t *testing.T) {
	c := &resourcev1.ResourceClaim{
		Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{
			{Name: "gpu", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: "gpu.example.com"}},
			{Name: "nic", FirstAvailable: []resourcev1.DeviceSubRequest{{Name: "fast", DeviceClassName: "fast-nic.example.com"}, {Name: "slow", DeviceClassName: "nic.example.com"}}},
		}}},
		Status: resourcev1.ResourceClaimStatus{Allocation: &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{Results: []resourcev1.DeviceRequestAllocationResult{
			{Request: "gpu", Driver: "gpu.example.com", Pool: "p", Device: "g0"},
			{Request: "nic/slow", Driver: "nic.example.com", Pool: "p", Device: "eth0"},
		}}}},
	}
	for _, tc := range []struct{ driver, device, want string }{
		{"gpu.example.com", "g0", "gpu.example.com"}, {"nic.example.com", "eth0", "nic.example.com"}, {"nic.example.com", "eth9", ""},
	} {
		if got := classOf(c, tc.driver, "p", tc.device); got != tc.want {
			t.Errorf("classOf(%s, %s) = %q, want %q", tc.driver, tc.device, got, tc.want)
		}
	}
	if got := classOf(&resourcev1.ResourceClaim{}, "gpu.example.com", "p", "g0"); got != "" {
		t.Errorf("an unallocated claim: %q", got)
	}
}

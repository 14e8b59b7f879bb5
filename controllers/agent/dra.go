// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"context"
	"fmt"
	"slices"
	"strings"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/numapref/numapref/internal/nodeagent/devices"
)

// DefaultNUMAAttributes are the device attributes whose value is a DRA device's NUMA
// node: any domain's numaNode ("dra.example.com/numaNode"), or the driver's own
// (unqualified "numaNode"). Kubernetes names no standard attribute for it.
var DefaultNUMAAttributes = []string{"numaNode"}

// DRATopology finds what the kubelet's PodResources does not say of the DRA devices of a
// node's pods (podresources.DRA): the NUMA node of each device, from an attribute of its
// device in its driver's ResourceSlices on this node, and the DeviceClass of the claim
// request it was allocated for, from its ResourceClaim. It reads the API directly, one
// List per driver and one Get per claim for each pod read: no cache and no watch, so an
// agent on a cluster without resource.k8s.io/v1 starts and works as before, and only its
// FollowDevices containers with DRA devices say DeviceAllocationsUnreadable.
type DRATopology struct {
	reader     client.Reader
	node       string
	attributes []string
}

// NewDRATopology reads through reader (the API, uncached) the ResourceSlices of node, and
// takes as a device's NUMA node the first of attributes (identifiers, the part after a
// domain) it carries as an integer.
func NewDRATopology(reader client.Reader, node string, attributes []string) *DRATopology {
	if len(attributes) == 0 {
		attributes = DefaultNUMAAttributes
	}
	return &DRATopology{reader: reader, node: node, attributes: attributes}
}

// +kubebuilder:rbac:groups=resource.k8s.io,resources=resourceslices;resourceclaims,verbs=get;list;watch

// Resolve fills in the Nodes and DeviceClassName of the DRA devices ds.
func (t *DRATopology) Resolve(ctx context.Context, ds []devices.Device) error {
	byDriver := map[string][]resourcev1.ResourceSlice{}
	claims := map[string]*resourcev1.ResourceClaim{} // by namespace/name
	for i := range ds {
		d := &ds[i]
		if _, ok := byDriver[d.Driver]; !ok {
			list, err := t.driverSlices(ctx, d.Driver)
			if err != nil {
				return err
			}
			byDriver[d.Driver] = list
		}
		d.Nodes = t.nodesOf(byDriver[d.Driver], d.Pool, d.ID)
		if _, ok := claims[d.Claim]; !ok {
			c, err := t.claim(ctx, d.Claim)
			if err != nil {
				return err
			}
			claims[d.Claim] = c
		}
		d.DeviceClassName = classOf(claims[d.Claim], d.Driver, d.Pool, d.ID)
	}
	return nil
}

// driverSlices lists driver's ResourceSlices on this node.
func (t *DRATopology) driverSlices(ctx context.Context, driver string) ([]resourcev1.ResourceSlice, error) {
	var list resourcev1.ResourceSliceList
	err := t.reader.List(ctx, &list, client.MatchingFields{"spec.nodeName": t.node, "spec.driver": driver})
	if err != nil {
		return nil, fmt.Errorf("listing the ResourceSlices of driver %s on node %s: %w", driver, t.node, err)
	}
	return list.Items, nil
}

// claim reads the ResourceClaim namespace/name.
func (t *DRATopology) claim(ctx context.Context, key string) (*resourcev1.ResourceClaim, error) {
	ns, name, _ := strings.Cut(key, "/")
	var c resourcev1.ResourceClaim
	if err := t.reader.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &c); err != nil {
		return nil, fmt.Errorf("reading ResourceClaim %s: %w", key, err)
	}
	return &c, nil
}

// nodesOf is the NUMA node of device id of pool in slices, from its attributes: nil when
// no slice has it, or it carries none. Of a pool's generations only the newest counts.
func (t *DRATopology) nodesOf(list []resourcev1.ResourceSlice, pool, id string) []int {
	var newest int64 = -1
	var nodes []int
	for _, s := range list {
		if s.Spec.Pool.Name != pool || s.Spec.Pool.Generation < newest {
			continue
		}
		for _, dev := range s.Spec.Devices {
			if dev.Name != id {
				continue
			}
			newest, nodes = s.Spec.Pool.Generation, nil
			if n, ok := t.numaAttribute(dev.Attributes); ok {
				nodes = []int{n}
			}
		}
	}
	return nodes
}

// numaAttribute is the first of t.attributes that attrs carries as an integer, in any
// domain or none, by the name's order: the lowest name when two domains have one.
func (t *DRATopology) numaAttribute(attrs map[resourcev1.QualifiedName]resourcev1.DeviceAttribute) (int, bool) {
	names := make([]string, 0, len(attrs))
	for name := range attrs {
		names = append(names, string(name))
	}
	slices.Sort(names)
	for _, want := range t.attributes {
		for _, name := range names {
			id := name
			if _, after, ok := strings.Cut(name, "/"); ok {
				id = after
			}
			if v := attrs[resourcev1.QualifiedName(name)].IntValue; id == want && v != nil {
				return int(*v), true
			}
		}
	}
	return 0, false
}

// classOf is the DeviceClass of the request of claim c that device driver/pool/id was
// allocated for: "" when c's allocation does not have it.
func classOf(c *resourcev1.ResourceClaim, driver, pool, id string) string {
	if c.Status.Allocation == nil {
		return ""
	}
	for _, r := range c.Status.Allocation.Devices.Results {
		if r.Driver == driver && r.Pool == pool && r.Device == id {
			return requestClass(c.Spec.Devices.Requests, r.Request)
		}
	}
	return ""
}

// requestClass is the DeviceClass of request name ("req", or "req/sub" for one of a
// request's alternatives).
func requestClass(requests []resourcev1.DeviceRequest, name string) string {
	main, sub, _ := strings.Cut(name, "/")
	for _, r := range requests {
		if r.Name != main {
			continue
		}
		if r.Exactly != nil && sub == "" {
			return r.Exactly.DeviceClassName
		}
		for _, s := range r.FirstAvailable {
			if s.Name == sub {
				return s.DeviceClassName
			}
		}
	}
	return ""
}

// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

// Package devices knows which devices the kubelet allocated to each container of this node,
// and on which NUMA nodes they sit, for mode FollowDevices. Its Cache reads them once per
// pod (a Reader: the kubelet's PodResources API, package podresources) in the background,
// each read bounded by a timeout, so that neither a pass nor a container's start ever waits
// on a slow or hung kubelet: a container whose pod was not read yet is Pending, and the
// Cache says when an answer came.
package devices

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/numapref/numapref/internal/numa"
)

// Device is one device the kubelet allocated to a container: a device plugin's (its
// ResourceName set) or a DRA driver's (Driver set).
type Device struct {
	// ResourceName is a device plugin's extended resource name (example.com/gpu); "" for
	// a DRA device.
	ResourceName string `json:"resourceName,omitempty"`
	// Driver, Pool and Claim name a DRA device's driver, pool and ResourceClaim
	// (namespace/name); DeviceClassName is the DeviceClass of the claim request it was
	// allocated for ("" when the claim could not say).
	Driver          string `json:"driver,omitempty"`
	Pool            string `json:"pool,omitempty"`
	Claim           string `json:"claim,omitempty"`
	DeviceClassName string `json:"deviceClassName,omitempty"`
	// ID is the device plugin's device ID, or the DRA device's name in its pool.
	ID string `json:"id"`
	// Nodes are the NUMA nodes the device sits on, sorted: its device plugin's
	// TopologyInfo, or its ResourceSlice's numaNode attribute. Empty: no topology.
	Nodes []int `json:"nodes,omitempty"`
}

// Equal says whether d and o are the same device on the same nodes.
func (d Device) Equal(o Device) bool {
	return d.ResourceName == o.ResourceName && d.Driver == o.Driver && d.Pool == o.Pool && d.Claim == o.Claim &&
		d.DeviceClassName == o.DeviceClassName && d.ID == o.ID && slices.Equal(d.Nodes, o.Nodes)
}

// String names the device for messages: "example.com/gpu dev-1 (node 1)".
func (d Device) String() string {
	kind := d.ResourceName
	if d.Driver != "" {
		kind = d.Driver + " " + d.Pool
		if d.DeviceClassName != "" {
			kind = d.DeviceClassName + " (" + kind + ")"
		}
	}
	where := "no NUMA node"
	if len(d.Nodes) > 0 {
		where = "node " + numa.FormatList(d.Nodes)
	}
	return fmt.Sprintf("%s %s on %s", kind, d.ID, where)
}

// Describe names up to three devices, and how many more there are.
func Describe(ds []Device) string {
	const shown = 3
	parts := make([]string, 0, shown+1)
	for i, d := range ds {
		if i == shown {
			parts = append(parts, fmt.Sprintf("%d more", len(ds)-shown))
			break
		}
		parts = append(parts, d.String())
	}
	return strings.Join(parts, ", ")
}

// PodDevices are the devices of each container of one pod, by container name.
type PodDevices map[string][]Device

// Reader reads the devices the kubelet allocated to the containers of one pod. ctx bounds
// the read: the Cache gives it its timeout.
type Reader interface {
	PodDevices(ctx context.Context, namespace, name string) (PodDevices, error)
}

// State says how far a container's devices are known.
type State int

const (
	// Pending: the pod's devices are being read (or will be, at the next look).
	Pending State = iota
	// Read: Devices are the container's (maybe none).
	Read
	// Unreadable: the last read failed; Err says why. Another is tried after a backoff.
	Unreadable
)

// Allocation is what is known of one container's devices.
type Allocation struct {
	State   State
	Devices []Device
	// Err says why the devices could not be read (Unreadable).
	Err string
	// AtCreation says the pod's devices were read at the creation of one of its
	// containers (NRI), with what the kubelet knew then; else after a pass asked.
	AtCreation bool
}

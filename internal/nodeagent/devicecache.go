// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package nodeagent

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/types"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
	"github.com/numapref/numapref/internal/metrics"
	"github.com/numapref/numapref/internal/nodeagent/desire"
	"github.com/numapref/numapref/internal/nodeagent/devices"
)

// DefaultDeviceCreationWait is how long a FollowDevices container's creation waits for the
// kubelet's answer about its pod's devices: well within the runtime's NRI deadline
// (nri.DefaultRequestTimeout). A kubelet that answers later has its answer used by the
// next pass (DeviceAllocationsPending until then).
const DefaultDeviceCreationWait = 300 * time.Millisecond

// deviceOwner owns the devices of the pods the FollowDevices containers belong to: a
// devices.Cache that reads each pod once, in the background, and kicks a full pass when
// an answer comes. A pass never waits for it; a creation waits at most creationWait.
type deviceOwner struct {
	cache        *devices.Cache // nil: no reader, every such container's devices are unreadable
	creationWait time.Duration
}

func newDeviceOwner(cfg EngineConfig, kick chan struct{}) *deviceOwner {
	o := &deviceOwner{creationWait: or(cfg.DeviceCreationWait, DefaultDeviceCreationWait)}
	if cfg.Devices != nil {
		m := cfg.DevicesMetrics
		if m == nil {
			m = metrics.NewDevices()
		}
		o.cache = devices.NewCache(cfg.Devices, devices.CacheOptions{Timeout: cfg.DevicesTimeout, Clock: cfg.Clock,
			Observe: func(result string) { m.Reads.WithLabelValues(result).Inc() }, Changed: func() { signal(kick) }})
	}
	return o
}

// lookupFor is plan.Input's Devices for pass p; a full pass first forgets the pods no
// longer desired.
func (o *deviceOwner) lookupFor(p *pass) func(desire.ContainerKey, desire.Desire) devices.Allocation {
	if o.cache == nil {
		return nil
	}
	if p.kind == passFull {
		uids := map[types.UID]bool{}
		for key := range p.desired {
			uids[key.PodUID] = true
		}
		o.cache.Retain(uids)
	}
	return func(key desire.ContainerKey, d desire.Desire) devices.Allocation {
		return o.cache.Lookup(podOf(key, d))
	}
}

// await waits, at most creationWait, for the devices of FollowDevices desire d's pod: a
// creation decides with what the kubelet knows by then.
func (o *deviceOwner) await(d desire.Desire) {
	if o.cache == nil || d.Placement.Mode != numav1.PlacementModeFollowDevices {
		return
	}
	o.cache.Await(context.Background(), podOf(d.Key(), d), o.creationWait)
}

func podOf(key desire.ContainerKey, d desire.Desire) devices.Pod {
	return devices.Pod{UID: key.PodUID, Namespace: d.Pod.Namespace, Name: d.Pod.Name, Container: key.Container}
}

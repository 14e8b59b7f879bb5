// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

// Package podresources reads the devices the kubelet allocated to a pod's containers from
// the kubelet's PodResources API (its gRPC socket, k8s.io/kubelet's podresources v1):
// device plugins' devices with their NUMA nodes, and the DRA devices of the pod's claims,
// whose NUMA nodes and device classes a DRA resolver finds through the API.
package podresources

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/numapref/numapref/internal/metrics"
	"github.com/numapref/numapref/internal/nodeagent/devices"
)

// DefaultSocket is where the kubelet serves its PodResources API (its root dir's
// pod-resources directory).
const DefaultSocket = "/var/lib/kubelet/pod-resources/kubelet.sock"

// maxMessage bounds the kubelet's answer: a List of a node's every pod (the kubelet's own
// client takes 16 MiB).
const maxMessage = 16 << 20

// DRA fills in what PodResources does not say of DRA devices: the NUMA nodes of each (its
// ResourceSlice's attributes) and the DeviceClass of the claim request it was allocated
// for (its ResourceClaim), through the API.
type DRA interface {
	Resolve(ctx context.Context, ds []devices.Device) error
}

// Client reads pods' devices from the kubelet's PodResources socket. It is a
// devices.Reader. Each read has a connection of its own: a pod is read once, so a
// connection kept between reads would mostly sit idle, and one kept through a kubelet's
// restart or a change of the socket's mode would answer the next read with its last
// error (gRPC's reconnect backoff) instead of what the socket says now.
type Client struct {
	socket  string
	dra     DRA
	metrics *metrics.Devices
	// listOnly is set once the kubelet said it serves no Get (before 1.27, or with the
	// KubeletPodResourcesGet feature gate off): List from then on.
	listOnly atomic.Bool
}

var _ devices.Reader = (*Client)(nil)

// New makes a client of the socket at path. dra resolves DRA devices (nil: they keep no
// node and no class); m counts the calls (nil: unregistered metrics).
func New(path string, dra DRA, m *metrics.Devices) (*Client, error) {
	c := &Client{socket: path, dra: dra, metrics: m}
	if c.metrics == nil {
		c.metrics = metrics.NewDevices()
	}
	conn, err := c.dial() // the target is checked now; the socket is dialled at a read
	if err != nil {
		return nil, err
	}
	_ = conn.Close()
	return c, nil
}

// dial makes a connection to the socket, which gRPC opens at the first call.
func (c *Client) dial() (*grpc.ClientConn, error) {
	conn, err := grpc.NewClient("unix://"+c.socket,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxMessage)))
	if err != nil {
		return nil, fmt.Errorf("the kubelet's PodResources socket %s: %w", c.socket, err)
	}
	return conn, nil
}

// PodDevices reads the devices of pod namespace/name: Get where the kubelet serves it,
// else List. A pod the kubelet does not know is an error (it may know it soon: the cache
// tries again).
func (c *Client) PodDevices(ctx context.Context, namespace, name string) (devices.PodDevices, error) {
	conn, err := c.dial()
	if err != nil {
		return nil, err
	}
	pod, err := c.pod(ctx, podresourcesv1.NewPodResourcesListerClient(conn), namespace, name)
	_ = conn.Close()
	if err != nil {
		return nil, err
	}
	out := devices.PodDevices{}
	var dra []devices.Device
	var at []draAt
	for _, ctr := range pod.GetContainers() {
		ds := containerDevices(ctr)
		out[ctr.GetName()] = ds
		for i, d := range ds {
			if d.Driver != "" {
				dra, at = append(dra, d), append(at, draAt{ctr.GetName(), i})
			}
		}
	}
	if len(dra) > 0 && c.dra != nil {
		if err := c.dra.Resolve(ctx, dra); err != nil {
			return nil, fmt.Errorf("finding the NUMA nodes of the DRA devices of pod %s/%s: %w", namespace, name, err)
		}
		for j, a := range at {
			out[a.container][a.i] = dra[j]
		}
	}
	return out, nil
}

// draAt is where a DRA device is in a PodDevices: the container and the index.
type draAt struct {
	container string
	i         int
}

// pod is the kubelet's answer for one pod.
func (c *Client) pod(ctx context.Context, lister podresourcesv1.PodResourcesListerClient, namespace, name string) (*podresourcesv1.PodResources, error) {
	if !c.listOnly.Load() {
		resp, err := call(c, ctx, "Get", func(ctx context.Context) (*podresourcesv1.GetPodResourcesResponse, error) {
			return lister.Get(ctx, &podresourcesv1.GetPodResourcesRequest{PodNamespace: namespace, PodName: name})
		})
		switch {
		case err == nil:
			return resp.GetPodResources(), nil
		case !getUnserved(err):
			return nil, c.explain(err)
		}
		c.listOnly.Store(true)
	}
	resp, err := call(c, ctx, "List", func(ctx context.Context) (*podresourcesv1.ListPodResourcesResponse, error) {
		return lister.List(ctx, &podresourcesv1.ListPodResourcesRequest{})
	})
	if err != nil {
		return nil, c.explain(err)
	}
	for _, p := range resp.GetPodResources() {
		if p.GetNamespace() == namespace && p.GetName() == name {
			return p, nil
		}
	}
	return nil, fmt.Errorf("the kubelet's PodResources List has no pod %s/%s (yet)", namespace, name)
}

// call makes one call of method, counted and timed.
func call[T any](c *Client, ctx context.Context, method string, f func(context.Context) (T, error)) (T, error) {
	start := time.Now()
	v, err := f(ctx)
	c.metrics.Seconds.WithLabelValues(method).Observe(time.Since(start).Seconds())
	c.metrics.Calls.WithLabelValues(method, result(err)).Inc()
	return v, err
}

// result is a call's result label.
func result(err error) string {
	switch status.Code(err) {
	case codes.OK:
		return "ok"
	case codes.Unavailable:
		// gRPC reports a connect(2) that the socket's mode refuses as Unavailable, as it
		// does an absent socket.
		if strings.Contains(status.Convert(err).Message(), "permission denied") {
			return "refused"
		}
		return "unavailable"
	case codes.Unimplemented:
		return "unavailable"
	case codes.PermissionDenied, codes.Unauthenticated, codes.ResourceExhausted:
		return "refused"
	case codes.DeadlineExceeded, codes.Canceled:
		return "timeout"
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return "timeout"
	}
	return "error"
}

// getUnserved says whether err is the kubelet's way of saying it serves no Get: an older
// kubelet has no such method, a newer one with the feature gate off says it is disabled.
func getUnserved(err error) bool {
	return status.Code(err) == codes.Unimplemented || strings.Contains(status.Convert(err).Message(), "Get method disabled")
}

// explain wraps a failed call's error with what it means.
func (c *Client) explain(err error) error {
	switch result(err) {
	case "unavailable":
		return fmt.Errorf("the kubelet's PodResources socket %s does not answer (absent, not mounted, or the kubelet is down): %w", c.socket, err)
	case "refused":
		return fmt.Errorf("the kubelet's PodResources socket %s refused the agent (the socket's mode, the agent's user and capabilities, or the kubelet's limits): %w", c.socket, err)
	case "timeout":
		return fmt.Errorf("the kubelet's PodResources socket %s did not answer in time: %w", c.socket, err)
	}
	return fmt.Errorf("the kubelet's PodResources socket %s: %w", c.socket, err)
}

// containerDevices are the devices of one container of the kubelet's answer: its device
// plugins' and its DRA claims'.
func containerDevices(ctr *podresourcesv1.ContainerResources) []devices.Device {
	var out []devices.Device
	for _, cd := range ctr.GetDevices() {
		nodes := topologyNodes(cd.GetTopology())
		for _, id := range cd.GetDeviceIds() {
			out = append(out, devices.Device{ResourceName: cd.GetResourceName(), ID: id, Nodes: slices.Clone(nodes)})
		}
	}
	for _, dr := range ctr.GetDynamicResources() {
		claim := dr.GetClaimNamespace() + "/" + dr.GetClaimName()
		for _, cr := range dr.GetClaimResources() {
			if cr.GetDeviceName() == "" {
				continue // not a device: nothing to follow
			}
			out = append(out, devices.Device{Driver: cr.GetDriverName(), Pool: cr.GetPoolName(), ID: cr.GetDeviceName(), Claim: claim})
		}
	}
	return out
}

// topologyNodes are the NUMA node ids of t, sorted; nil for none.
func topologyNodes(t *podresourcesv1.TopologyInfo) []int {
	var nodes []int
	for _, n := range t.GetNodes() {
		nodes = append(nodes, int(n.GetID()))
	}
	slices.Sort(nodes)
	return slices.Compact(nodes)
}

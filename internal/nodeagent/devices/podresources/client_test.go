// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package podresources

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/numapref/numapref/internal/metrics"
	"github.com/numapref/numapref/internal/nodeagent/devices"
	"github.com/numapref/numapref/internal/testutil/podresourcesfake"
)

// serve serves a fake kubelet (a real gRPC server on a unix socket) that answers with
// pods, until the test ends.
func serve(t *testing.T, b podresourcesfake.Behaviour, pods ...*podresourcesv1.PodResources) *podresourcesfake.Kubelet {
	t.Helper()
	k, err := podresourcesfake.Serve(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(k.Stop)
	k.SetPods(pods...)
	k.Set(b)
	return k
}

// gpuPod has a container with two GPUs on node 1, one without topology, and a DRA claim's
// device; a sidecar with nothing.
var gpuPod = &podresourcesv1.PodResources{Namespace: "ns", Name: "gpu", Containers: []*podresourcesv1.ContainerResources{
	{Name: "main",
		Devices: []*podresourcesv1.ContainerDevices{
			{ResourceName: "example.com/gpu", DeviceIds: []string{"g0", "g1"},
				Topology: &podresourcesv1.TopologyInfo{Nodes: []*podresourcesv1.NUMANode{{ID: 1}}}},
			{ResourceName: "example.com/fpga", DeviceIds: []string{"f0"}},
		},
		CpuIds: []int64{2, 3},
		DynamicResources: []*podresourcesv1.DynamicResource{{ClaimName: "nic", ClaimNamespace: "ns",
			ClaimResources: []*podresourcesv1.ClaimResource{{DriverName: "nic.example.com", PoolName: "node-a", DeviceName: "eth1"}}}},
	},
	{Name: "sidecar"},
}}

// topologies is a DRA resolver from a table of device names, and the class of every
// device.
type topologies map[string][]int

func (tp topologies) Resolve(_ context.Context, ds []devices.Device) error {
	for i := range ds {
		ds[i].Nodes, ds[i].DeviceClassName = tp[ds[i].ID], "nic.example.com"
	}
	return nil
}

var wantGPUPod = devices.PodDevices{
	"main": {
		{ResourceName: "example.com/gpu", ID: "g0", Nodes: []int{1}},
		{ResourceName: "example.com/gpu", ID: "g1", Nodes: []int{1}},
		{ResourceName: "example.com/fpga", ID: "f0"},
		{Driver: "nic.example.com", Pool: "node-a", Claim: "ns/nic", DeviceClassName: "nic.example.com", ID: "eth1", Nodes: []int{0}},
	},
	"sidecar": nil,
}

// The client reads one pod with Get over the real socket: device plugins' devices with
// their NUMA nodes, a device without topology as such, DRA devices resolved; one call,
// counted.
func TestGet(t *testing.T) {
	k := serve(t, podresourcesfake.Behaviour{}, gpuPod)
	m := metrics.NewDevices()
	c, err := New(k.Socket, topologies{"eth1": {0}}, m)
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.PodDevices(context.Background(), "ns", "gpu")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(wantGPUPod, got); diff != "" {
		t.Errorf("devices (-want +got):\n%s", diff)
	}
	if k.Gets.Load() != 1 || k.Lists.Load() != 0 {
		t.Errorf("%d Gets, %d Lists; want one Get", k.Gets.Load(), k.Lists.Load())
	}
	if n := testutil.ToFloat64(m.Calls.WithLabelValues("Get", "ok")); n != 1 {
		t.Errorf("numapref_pod_resources_calls_total{Get,ok} = %v, want 1", n)
	}
	if _, err := c.PodDevices(context.Background(), "ns", "absent"); err == nil {
		t.Error("a pod the kubelet does not know: no error")
	}
}

// A kubelet that serves no Get (the feature gate off) is asked with List, from then on
// without asking Get again.
func TestListWhenGetIsDisabled(t *testing.T) {
	k := serve(t, podresourcesfake.Behaviour{GetDisabled: true}, &podresourcesv1.PodResources{Namespace: "ns", Name: "other"}, gpuPod)
	c, err := New(k.Socket, topologies{"eth1": {0}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		got, err := c.PodDevices(context.Background(), "ns", "gpu")
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(wantGPUPod, got); diff != "" {
			t.Errorf("devices (-want +got):\n%s", diff)
		}
	}
	if k.Gets.Load() != 1 || k.Lists.Load() != 2 {
		t.Errorf("%d Gets, %d Lists; want one Get, then Lists", k.Gets.Load(), k.Lists.Load())
	}
	if _, err := c.PodDevices(context.Background(), "ns", "absent"); err == nil || !strings.Contains(err.Error(), "has no pod ns/absent") {
		t.Errorf("a pod List does not have: %v", err)
	}
}

// Each failure says what it means, is counted by its kind, and never outlasts the
// caller's deadline: no socket, a refusal, a hung kubelet.
func TestFailures(t *testing.T) {
	for name, tc := range map[string]struct {
		k      *podresourcesfake.Behaviour // nil: no server at all
		result string
		says   string
	}{
		"no socket":  {result: "unavailable", says: "does not answer"},
		"refused":    {k: &podresourcesfake.Behaviour{Err: status.Error(codes.PermissionDenied, "no")}, result: "refused", says: "refused the agent"},
		"rate limit": {k: &podresourcesfake.Behaviour{Err: status.Error(codes.ResourceExhausted, "slow down")}, result: "refused", says: "refused the agent"},
		"hung":       {k: &podresourcesfake.Behaviour{Hang: true}, result: "timeout", says: "did not answer in time"},
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "absent.sock")
			if tc.k != nil {
				path = serve(t, *tc.k).Socket
			}
			m := metrics.NewDevices()
			c, err := New(path, nil, m)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			defer cancel()
			start := time.Now()
			_, err = c.PodDevices(ctx, "ns", "gpu")
			if err == nil || !strings.Contains(err.Error(), tc.says) || !strings.Contains(err.Error(), path) {
				t.Errorf("error %v, want one that says %q and names the socket", err, tc.says)
			}
			if waited := time.Since(start); waited > 5*time.Second {
				t.Errorf("the call took %s past its deadline", waited)
			}
			if n := testutil.ToFloat64(m.Calls.WithLabelValues("Get", tc.result)); n != 1 {
				t.Errorf("numapref_pod_resources_calls_total{Get,%s} = %v, want 1", tc.result, n)
			}
		})
	}
}

// The client is a devices.Reader: the cache reads through it, once per pod.
func TestThroughTheCache(t *testing.T) {
	k := serve(t, podresourcesfake.Behaviour{}, gpuPod)
	c, err := New(k.Socket, topologies{"eth1": {0}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	cache := devices.NewCache(c, devices.CacheOptions{})
	p := devices.Pod{UID: "uid", Namespace: "ns", Name: "gpu", Container: "main"}
	a := cache.Await(context.Background(), p, 5*time.Second)
	if a.State != devices.Read || len(a.Devices) != 4 {
		t.Fatalf("allocation %+v, want the four devices", a)
	}
	for range 10 {
		cache.Lookup(p)
	}
	if k.Gets.Load() != 1 {
		t.Errorf("%d Gets, want 1", k.Gets.Load())
	}
}

// A connect(2) the socket's mode refuses reaches the client as Unavailable, as an absent
// socket does: the error says the agent was refused, not that the kubelet is down.
func TestExplainPermissionDenied(t *testing.T) {
	c := &Client{socket: "/k/kubelet.sock"}
	denied := status.Error(codes.Unavailable, `connection error: desc = "transport: Error while dialing: dial unix /k/kubelet.sock: connect: permission denied"`)
	if r := result(denied); r != "refused" {
		t.Errorf("denied: counted as %s, want refused", r)
	}
	if got := c.explain(denied).Error(); !strings.Contains(got, "refused the agent") || !strings.Contains(got, "permission denied") {
		t.Errorf("denied: %s", got)
	}
	absent := status.Error(codes.Unavailable, `connection error: desc = "transport: Error while dialing: dial unix /k/kubelet.sock: connect: no such file or directory"`)
	if got := c.explain(absent).Error(); !strings.Contains(got, "does not answer") {
		t.Errorf("absent: %s", got)
	}
}

// Each read meets the socket as it is at that read. A kubelet serving on its open socket
// while the socket's file is moved aside (or made mode 000) still answers a connection
// made before; a read must say the socket is gone, as the next agent to start would find
// it, and read again once it is back.
func TestEachReadMeetsTheSocketAsItIs(t *testing.T) {
	k := serve(t, podresourcesfake.Behaviour{}, gpuPod)
	c, err := New(k.Socket, topologies{"eth1": {0}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	read := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_, err := c.PodDevices(ctx, "ns", "gpu")
		return err
	}
	if err := read(); err != nil {
		t.Fatalf("the socket there: %v", err)
	}
	aside := k.Socket + ".aside"
	if err := os.Rename(k.Socket, aside); err != nil {
		t.Fatal(err)
	}
	if err := read(); err == nil || !strings.Contains(err.Error(), "does not answer") {
		t.Errorf("the socket moved aside: %v, want an error that says it does not answer", err)
	}
	if err := os.Rename(aside, k.Socket); err != nil {
		t.Fatal(err)
	}
	if err := read(); err != nil {
		t.Errorf("the socket back: %v, want the pod read", err)
	}
}

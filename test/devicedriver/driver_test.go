// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	drapb "k8s.io/kubelet/pkg/apis/dra/v1"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

// registry stands for the kubelet's device plugin registration: it records the requests.
type registry struct {
	pluginapi.UnimplementedRegistrationServer
	got chan *pluginapi.RegisterRequest
}

func (r *registry) Register(_ context.Context, req *pluginapi.RegisterRequest) (*pluginapi.Empty, error) {
	r.got <- req
	return &pluginapi.Empty{}, nil
}

func dial(t *testing.T, path string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient("unix://"+path, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// The device plugin registers each resource with the kubelet's socket and lists its
// devices with their NUMA nodes, one without topology as such, over real gRPC.
func TestDevicePlugin(t *testing.T) {
	dir := t.TempDir()
	reg := &registry{got: make(chan *pluginapi.RegisterRequest, 4)}
	l, err := net.Listen("unix", filepath.Join(dir, "kubelet.sock"))
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	pluginapi.RegisterRegistrationServer(s, reg)
	go func() { _ = s.Serve(l) }()
	defer s.Stop()

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- runDevicePlugin(ctx, []string{"-plugin-dir", dir, "-resource", "example.com/gpu=g0:1,g1:"})
	}()
	var req *pluginapi.RegisterRequest
	select {
	case req = <-reg.got:
	case <-time.After(30 * time.Second):
		t.Fatal("no registration")
	}
	if req.ResourceName != "example.com/gpu" || req.Version != pluginapi.Version || req.Endpoint != "numapref-example-com-gpu.sock" {
		t.Fatalf("registration %+v", req)
	}
	stream, err := pluginapi.NewDevicePluginClient(dial(t, filepath.Join(dir, req.Endpoint))).ListAndWatch(ctx, &pluginapi.Empty{})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, d := range resp.Devices {
		nodes := "none"
		if d.Topology != nil {
			nodes = ""
			for _, n := range d.Topology.Nodes {
				nodes += string(rune('0' + n.ID))
			}
		}
		got = append(got, d.ID+":"+d.Health+":"+nodes)
	}
	if diff := cmp.Diff([]string{"g0:Healthy:1", "g1:Healthy:none"}, got); diff != "" {
		t.Errorf("devices (-want +got):\n%s", diff)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("the plugin ended with %v", err)
	}
}

// The DRA driver tells the kubelet what it is, publishes its devices with their numaNode,
// and prepares a claim with the devices its allocation names.
func TestDRADriver(t *testing.T) {
	claim := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c", UID: types.UID("uid-c")},
		Status: resourcev1.ResourceClaimStatus{Allocation: &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{
			Results: []resourcev1.DeviceRequestAllocationResult{
				{Request: "port", Driver: "nic.example.com", Pool: "n", Device: "eth1"},
				{Request: "gpu", Driver: "gpu.example.com", Pool: "n", Device: "g0"},
			}}}}}
	d := &draDriver{name: "nic.example.com", node: "n", endpoint: "/x/dra.sock", client: fake.NewClientset(claim)}
	var err error
	if d.devices, err = parseDevices("eth0:0,eth1:1,eth9:"); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	info, err := d.GetInfo(ctx, &registerapi.InfoRequest{})
	if err != nil || info.Type != registerapi.DRAPlugin || info.Name != d.name || info.Endpoint != d.endpoint ||
		!cmp.Equal(info.SupportedVersions, []string{drapb.DRAPluginService}) {
		t.Errorf("info %+v, %v", info, err)
	}
	if err := d.publish(ctx); err != nil {
		t.Fatal(err)
	}
	slice, err := d.client.ResourceV1().ResourceSlices().Get(ctx, "n-nic.example.com", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	nodes := map[string]int64{}
	for _, dev := range slice.Spec.Devices {
		if v := dev.Attributes["nic.example.com/numaNode"].IntValue; v != nil {
			nodes[dev.Name] = *v
		}
	}
	if diff := cmp.Diff(map[string]int64{"eth0": 0, "eth1": 1}, nodes); diff != "" || *slice.Spec.NodeName != "n" {
		t.Errorf("numaNode by device (-want +got):\n%s", diff)
	}
	resp, err := d.NodePrepareResources(ctx, &drapb.NodePrepareResourcesRequest{Claims: []*drapb.Claim{
		{Namespace: "ns", Name: "c", Uid: "uid-c"}, {Namespace: "ns", Name: "c", Uid: "another"}}})
	if err != nil {
		t.Fatal(err)
	}
	ok := resp.Claims["uid-c"]
	if ok.Error != "" || len(ok.Devices) != 1 || ok.Devices[0].DeviceName != "eth1" || ok.Devices[0].PoolName != "n" {
		t.Errorf("prepared %+v, want eth1 alone", ok)
	}
	if resp.Claims["another"].Error == "" {
		t.Error("a claim of another UID was prepared")
	}
}

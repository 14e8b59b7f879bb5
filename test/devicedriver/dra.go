// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"google.golang.org/grpc"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	drapb "k8s.io/kubelet/pkg/apis/dra/v1"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
	"k8s.io/utils/ptr"
)

// draDriver is a DRA driver of fake devices on one node.
type draDriver struct {
	drapb.UnimplementedDRAPluginServer
	registerapi.UnimplementedRegistrationServer
	name     string
	node     string
	devices  []device
	endpoint string // the DRA service's socket, which the kubelet dials
	client   kubernetes.Interface
}

// runDRA registers the driver with the kubelet, publishes its ResourceSlice and serves
// until ctx ends.
func runDRA(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("dra", flag.ContinueOnError)
	d := &draDriver{}
	fs.StringVar(&d.name, "driver", "nic.example.com", "the driver's name")
	fs.StringVar(&d.node, "node", os.Getenv("NODE_NAME"), "the node whose devices it publishes")
	list := fs.String("devices", "eth0:0,eth1:1", "name:node,... (\"eth9:\": no numaNode)")
	root := fs.String("kubelet-dir", "/var/lib/kubelet", "the kubelet's root dir (plugins_registry, plugins)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var err error
	if d.devices, err = parseDevices(*list); err != nil {
		return err
	}
	if d.node == "" {
		return errors.New("no -node (or NODE_NAME)")
	}
	cfg, err := rest.InClusterConfig()
	if err != nil {
		return err
	}
	if d.client, err = kubernetes.NewForConfig(cfg); err != nil {
		return err
	}
	pluginDir := filepath.Join(*root, "plugins", d.name)
	if err := os.MkdirAll(pluginDir, 0o750); err != nil {
		return err
	}
	d.endpoint = filepath.Join(pluginDir, "dra.sock")
	if err := serveOn(ctx, d.endpoint, func(s *grpc.Server) { drapb.RegisterDRAPluginServer(s, d) }); err != nil {
		return err
	}
	if err := d.publish(ctx); err != nil {
		return err
	}
	// Registration last: the kubelet dials the endpoint as soon as it sees this socket.
	reg := filepath.Join(*root, "plugins_registry", d.name+"-reg.sock")
	if err := serveOn(ctx, reg, func(s *grpc.Server) { registerapi.RegisterRegistrationServer(s, d) }); err != nil {
		return err
	}
	logf("DRA driver %s: %d devices on node %s, registered at %s", d.name, len(d.devices), d.node, reg)
	<-ctx.Done()
	cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return d.client.ResourceV1().ResourceSlices().Delete(cctx, d.sliceName(), metav1.DeleteOptions{})
}

// serveOn serves a gRPC server made by register on socket path until ctx ends.
func serveOn(ctx context.Context, path string, register func(*grpc.Server)) error {
	_ = os.Remove(path)
	l, err := net.Listen("unix", path)
	if err != nil {
		return err
	}
	s := grpc.NewServer()
	register(s)
	go func() { _ = s.Serve(l) }()
	go func() {
		<-ctx.Done()
		s.Stop()
		_ = os.Remove(path)
	}()
	return nil
}

func (d *draDriver) sliceName() string { return d.node + "-" + d.name }

// publish creates (or replaces) the ResourceSlice of the driver's devices on its node:
// one pool named after the node, each device with <driver>/numaNode where it has one.
func (d *draDriver) publish(ctx context.Context) error {
	slice := &resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: d.sliceName()}, Spec: resourcev1.ResourceSliceSpec{
		Driver: d.name, NodeName: ptr.To(d.node), Pool: resourcev1.ResourcePool{Name: d.node, Generation: 1, ResourceSliceCount: 1}}}
	for _, dev := range d.devices {
		rd := resourcev1.Device{Name: dev.name}
		if dev.node >= 0 {
			rd.Attributes = map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{
				resourcev1.QualifiedName(d.name + "/numaNode"): {IntValue: ptr.To(int64(dev.node))}}
		}
		slice.Spec.Devices = append(slice.Spec.Devices, rd)
	}
	slices := d.client.ResourceV1().ResourceSlices()
	err := slices.Delete(ctx, slice.Name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting the old ResourceSlice: %w", err)
	}
	if _, err := slices.Create(ctx, slice, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("publishing the ResourceSlice: %w", err)
	}
	return nil
}

// GetInfo tells the kubelet what the driver is and where its DRA service is.
func (d *draDriver) GetInfo(context.Context, *registerapi.InfoRequest) (*registerapi.PluginInfo, error) {
	return &registerapi.PluginInfo{Type: registerapi.DRAPlugin, Name: d.name, Endpoint: d.endpoint,
		SupportedVersions: []string{drapb.DRAPluginService}}, nil
}

// NotifyRegistrationStatus logs the kubelet's verdict.
func (d *draDriver) NotifyRegistrationStatus(_ context.Context, s *registerapi.RegistrationStatus) (*registerapi.RegistrationStatusResponse, error) {
	logf("DRA driver %s: registered %v %s", d.name, s.PluginRegistered, s.Error)
	return &registerapi.RegistrationStatusResponse{}, nil
}

// NodePrepareResources answers each claim with its devices of this driver, as the
// claim's allocation names them: there is nothing to set up for a fake device.
func (d *draDriver) NodePrepareResources(ctx context.Context, req *drapb.NodePrepareResourcesRequest) (*drapb.NodePrepareResourcesResponse, error) {
	resp := &drapb.NodePrepareResourcesResponse{Claims: map[string]*drapb.NodePrepareResourceResponse{}}
	for _, c := range req.Claims {
		out := &drapb.NodePrepareResourceResponse{}
		claim, err := d.client.ResourceV1().ResourceClaims(c.Namespace).Get(ctx, c.Name, metav1.GetOptions{})
		switch {
		case err != nil:
			out.Error = err.Error()
		case string(claim.UID) != c.Uid || claim.Status.Allocation == nil:
			out.Error = "the claim is not the one allocated"
		default:
			for _, r := range claim.Status.Allocation.Devices.Results {
				if r.Driver == d.name {
					out.Devices = append(out.Devices, &drapb.Device{RequestNames: []string{r.Request}, PoolName: r.Pool, DeviceName: r.Device})
				}
			}
		}
		resp.Claims[c.Uid] = out
	}
	return resp, nil
}

// NodeUnprepareResources has nothing to undo.
func (d *draDriver) NodeUnprepareResources(_ context.Context, req *drapb.NodeUnprepareResourcesRequest) (*drapb.NodeUnprepareResourcesResponse, error) {
	resp := &drapb.NodeUnprepareResourcesResponse{Claims: map[string]*drapb.NodeUnprepareResourceResponse{}}
	for _, c := range req.Claims {
		resp.Claims[c.Uid] = &drapb.NodeUnprepareResourceResponse{}
	}
	return resp, nil
}

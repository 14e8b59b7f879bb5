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
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// resourceFlags are the repeated -resource name=devices flags.
type resourceFlags map[string][]device

func (r resourceFlags) String() string { return fmt.Sprint(map[string][]device(r)) }

func (r resourceFlags) Set(v string) error {
	name, list, ok := strings.Cut(v, "=")
	if !ok {
		return fmt.Errorf("%q: want resource=devices", v)
	}
	ds, err := parseDevices(list)
	if err != nil {
		return err
	}
	r[name] = ds
	return nil
}

// runDevicePlugin serves one device plugin per resource until ctx ends.
func runDevicePlugin(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("device-plugin", flag.ContinueOnError)
	resources := resourceFlags{}
	fs.Var(resources, "resource", "resource=name:node,... (repeated)")
	dir := fs.String("plugin-dir", pluginapi.DevicePluginPath, "the kubelet's device plugin directory")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if len(resources) == 0 {
		return errors.New("no -resource")
	}
	for name, ds := range resources {
		p := &plugin{resource: name, devices: ds, socket: filepath.Join(*dir, "numapref-"+strings.NewReplacer("/", "-", ".", "-").Replace(name)+".sock")}
		if err := p.serve(ctx); err != nil {
			return err
		}
		if err := p.register(ctx, filepath.Join(*dir, "kubelet.sock")); err != nil {
			if ctx.Err() != nil {
				return nil // stopped while the kubelet's answer was on its way: a clean stop
			}
			return err
		}
		logf("device plugin %s: registered %d devices", name, len(ds))
	}
	<-ctx.Done()
	return nil
}

// plugin is one resource's device plugin.
type plugin struct {
	pluginapi.UnimplementedDevicePluginServer
	resource string
	devices  []device
	socket   string
}

// serve serves the plugin on its socket until ctx ends, then removes the socket.
func (p *plugin) serve(ctx context.Context) error {
	_ = os.Remove(p.socket)
	l, err := net.Listen("unix", p.socket)
	if err != nil {
		return err
	}
	s := grpc.NewServer()
	pluginapi.RegisterDevicePluginServer(s, p)
	go func() { _ = s.Serve(l) }()
	go func() {
		<-ctx.Done()
		s.Stop()
		_ = os.Remove(p.socket)
	}()
	return nil
}

// register tells the kubelet of the plugin's socket and resource.
func (p *plugin) register(ctx context.Context, kubelet string) error {
	conn, err := grpc.NewClient("unix://"+kubelet, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	_, err = pluginapi.NewRegistrationClient(conn).Register(ctx, &pluginapi.RegisterRequest{
		Version: pluginapi.Version, Endpoint: filepath.Base(p.socket), ResourceName: p.resource})
	if err != nil {
		return fmt.Errorf("registering %s with the kubelet at %s: %w", p.resource, kubelet, err)
	}
	return nil
}

// GetDevicePluginOptions: no PreStartContainer, no preferred allocation.
func (p *plugin) GetDevicePluginOptions(context.Context, *pluginapi.Empty) (*pluginapi.DevicePluginOptions, error) {
	return &pluginapi.DevicePluginOptions{}, nil
}

// ListAndWatch lists the devices, healthy, with their NUMA nodes, and holds the stream.
func (p *plugin) ListAndWatch(_ *pluginapi.Empty, stream pluginapi.DevicePlugin_ListAndWatchServer) error {
	var list []*pluginapi.Device
	for _, d := range p.devices {
		dev := &pluginapi.Device{ID: d.name, Health: pluginapi.Healthy}
		if d.node >= 0 {
			dev.Topology = &pluginapi.TopologyInfo{Nodes: []*pluginapi.NUMANode{{ID: int64(d.node)}}}
		}
		list = append(list, dev)
	}
	if err := stream.Send(&pluginapi.ListAndWatchResponse{Devices: list}); err != nil {
		return err
	}
	<-stream.Context().Done()
	return nil
}

// Allocate gives each container its device IDs in an environment variable: a fake device
// has nothing to mount.
func (p *plugin) Allocate(_ context.Context, req *pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error) {
	resp := &pluginapi.AllocateResponse{}
	for _, c := range req.ContainerRequests {
		resp.ContainerResponses = append(resp.ContainerResponses, &pluginapi.ContainerAllocateResponse{
			Envs: map[string]string{"NUMAPREF_TEST_DEVICES": strings.Join(c.DevicesIds, ",")}})
	}
	return resp, nil
}

// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

// Package podresourcesfake serves the kubelet's PodResources API (k8s.io/kubelet's
// podresources v1) on a real gRPC server and unix socket, answering as the kubelet does:
// Get of one pod (or "disabled", as a kubelet with the KubeletPodResourcesGet feature
// gate off), List of every pod, or the error or the hang a test asks for.
package podresourcesfake

import (
	"context"
	"errors"
	"net"
	"path/filepath"
	"sync"
	"sync/atomic"

	"google.golang.org/grpc"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"
)

// Kubelet is the fake kubelet's PodResources server. Its fields may be changed while it
// serves, under Set.
type Kubelet struct {
	podresourcesv1.UnimplementedPodResourcesListerServer

	mu   sync.Mutex
	pods []*podresourcesv1.PodResources
	// GetDisabled answers Get as a kubelet with the feature gate off; Hang holds every
	// call until its caller gives up; Err fails every call.
	getDisabled bool
	hang        bool
	err         error

	// Gets and Lists count the calls.
	Gets, Lists atomic.Int32
	server      *grpc.Server
	// Socket is where it serves.
	Socket string
}

// Behaviour is how the fake answers.
type Behaviour struct {
	GetDisabled bool
	Hang        bool
	Err         error
}

// Serve serves a fake kubelet on dir/kubelet.sock until Stop.
func Serve(dir string) (*Kubelet, error) {
	k := &Kubelet{Socket: filepath.Join(dir, "kubelet.sock")}
	l, err := net.Listen("unix", k.Socket)
	if err != nil {
		return nil, err
	}
	k.server = grpc.NewServer()
	podresourcesv1.RegisterPodResourcesListerServer(k.server, k)
	go func() { _ = k.server.Serve(l) }()
	return k, nil
}

// Stop stops serving and removes the socket.
func (k *Kubelet) Stop() { k.server.Stop() }

// SetPods sets the pods the fake knows.
func (k *Kubelet) SetPods(pods ...*podresourcesv1.PodResources) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.pods = pods
}

// Set sets how the fake answers.
func (k *Kubelet) Set(b Behaviour) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.getDisabled, k.hang, k.err = b.GetDisabled, b.Hang, b.Err
}

func (k *Kubelet) behaviour() (Behaviour, []*podresourcesv1.PodResources) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return Behaviour{GetDisabled: k.getDisabled, Hang: k.hang, Err: k.err}, k.pods
}

// Get answers for one pod.
func (k *Kubelet) Get(ctx context.Context, req *podresourcesv1.GetPodResourcesRequest) (*podresourcesv1.GetPodResourcesResponse, error) {
	k.Gets.Add(1)
	b, pods := k.behaviour()
	switch {
	case b.GetDisabled:
		return nil, errors.New("PodResources API Get method disabled") // the kubelet's words
	case b.Hang:
		<-ctx.Done()
		return nil, ctx.Err()
	case b.Err != nil:
		return nil, b.Err
	}
	for _, p := range pods {
		if p.Namespace == req.PodNamespace && p.Name == req.PodName {
			return &podresourcesv1.GetPodResourcesResponse{PodResources: p}, nil
		}
	}
	return nil, errors.New("pod " + req.PodName + " in namespace " + req.PodNamespace + " not found")
}

// List answers for every pod.
func (k *Kubelet) List(ctx context.Context, _ *podresourcesv1.ListPodResourcesRequest) (*podresourcesv1.ListPodResourcesResponse, error) {
	k.Lists.Add(1)
	b, pods := k.behaviour()
	switch {
	case b.Hang:
		<-ctx.Done()
		return nil, ctx.Err()
	case b.Err != nil:
		return nil, b.Err
	}
	return &podresourcesv1.ListPodResourcesResponse{PodResources: pods}, nil
}

// Device is one device plugin device of a container, on nodes (none: no topology).
func Device(resource, id string, nodes ...int64) *podresourcesv1.ContainerDevices {
	cd := &podresourcesv1.ContainerDevices{ResourceName: resource, DeviceIds: []string{id}}
	if len(nodes) > 0 {
		cd.Topology = &podresourcesv1.TopologyInfo{}
		for _, n := range nodes {
			cd.Topology.Nodes = append(cd.Topology.Nodes, &podresourcesv1.NUMANode{ID: n})
		}
	}
	return cd
}

// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

// Command devicedriver offers fake devices on chosen NUMA nodes to a real kubelet, through
// the kubelet's own plugin APIs, for the FollowDevices e2e:
//
//	devicedriver device-plugin -resource example.com/gpu=g0:1,g1:1 [-resource ...]
//	    a device plugin (k8s.io/kubelet's deviceplugin v1beta1): registers each resource
//	    with the kubelet, lists its devices with their TopologyInfo in ListAndWatch ("g2:"
//	    has none), and answers Allocate.
//	devicedriver dra -driver nic.example.com -devices eth0:0,eth1:1 -node NODE
//	    a DRA driver (the kubelet's DRA plugin API, dra v1, and its plugin registration):
//	    publishes a ResourceSlice of its devices on NODE, each with the attribute
//	    <driver>/numaNode (none for "eth9:"), and prepares the claims the kubelet hands it.
//
// Both run until SIGTERM; the DRA driver then deletes its ResourceSlice.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: devicedriver device-plugin|dra [flags]")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	var err error
	switch os.Args[1] {
	case "device-plugin":
		err = runDevicePlugin(ctx, os.Args[2:])
	case "dra":
		err = runDRA(ctx, os.Args[2:])
	default:
		err = fmt.Errorf("unknown command %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "devicedriver:", err)
		os.Exit(1)
	}
}

// device is a fake device: its name and NUMA node (-1: no topology).
type device struct {
	name string
	node int
}

// parseDevices parses "name:node,name:" (an empty node: no topology).
func parseDevices(s string) ([]device, error) {
	var out []device
	for _, part := range strings.Split(s, ",") {
		name, node, ok := strings.Cut(part, ":")
		if !ok || name == "" {
			return nil, fmt.Errorf("device %q: want name:node, or name: without a node", part)
		}
		d := device{name: name, node: -1}
		if node != "" {
			n, err := strconv.Atoi(node)
			if err != nil || n < 0 {
				return nil, fmt.Errorf("device %q: node %q", part, node)
			}
			d.node = n
		}
		out = append(out, d)
	}
	return out, nil
}

func logf(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) }

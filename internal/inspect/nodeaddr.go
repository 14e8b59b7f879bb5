// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package inspect

import (
	"net"

	corev1 "k8s.io/api/core/v1"
)

// NodeIPs are a Node's InternalIP and ExternalIP addresses: what clients dial.
func NodeIPs(node *corev1.Node) []net.IP {
	var ips []net.IP
	for _, a := range node.Status.Addresses {
		if a.Type != corev1.NodeInternalIP && a.Type != corev1.NodeExternalIP {
			continue
		}
		if ip := net.ParseIP(a.Address); ip != nil {
			ips = append(ips, ip)
		}
	}
	return ips
}

// NodeInternalIPs are a Node's InternalIP addresses: what an agent's node certificate
// names (controllers/agentcert) and the only addresses its signer accepts there. An
// ExternalIP is often a cloud's NAT address, which no agent listens on.
func NodeInternalIPs(node *corev1.Node) []net.IP {
	var ips []net.IP
	for _, a := range node.Status.Addresses {
		if a.Type != corev1.NodeInternalIP {
			continue
		}
		if ip := net.ParseIP(a.Address); ip != nil {
			ips = append(ips, ip)
		}
	}
	return ips
}

// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package kindnode

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// podSubnet is kind's default. Each node's bridge CNI configuration (offline image) takes
// its own /24 from the top of it, clear of the /24s the controller manager hands out from
// the bottom.
const podSubnet = "10.244.0.0/16"

// writeConfig writes the kind configuration (and the files it mounts into the nodes) and
// returns its path. image is the offline node image's reference, or "" for kind's
// published image.
func (c *Cluster) writeConfig(ctx context.Context, image string) (string, error) { //nolint:funlen // test tooling: the kind configuration, spelled out as kind reads it
	dir := filepath.Join(c.Dir, "config")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	var b strings.Builder
	b.WriteString(`kind: Cluster
apiVersion: kind.x-k8s.io/v1alpha4
networking:
  podSubnet: ` + podSubnet + "\n")
	if c.Offline {
		// The offline image has neither kindnetd's nor kube-proxy's nor CoreDNS's image:
		// bridge CNI configurations per node (below), no kube-proxy (the agent reaches the
		// API server at the control plane's address: the chart's apiServer.host), and no
		// CoreDNS addon (nothing in the suite resolves cluster names; without kube-proxy
		// no pod could reach the DNS Service anyway). kind skips its preflight phase itself;
		// the list replaces kind's, so it names it again.
		b.WriteString(`  disableDefaultCNI: true
  kubeProxyMode: none
`)
	}
	b.WriteString(`kubeadmConfigPatches:
- |
  kind: KubeletConfiguration
  # Kubernetes 1.35+ refuses to start on a cgroup v1 host (these machines: v1 hybrid)
  # unless told it may.
  failCgroupV1: false
`)
	if c.Offline {
		b.WriteString(`- |
  kind: InitConfiguration
  skipPhases: [preflight, addon/kube-proxy, addon/coredns]
`)
	}
	b.WriteString("nodes:\n")
	var cgroupfsConfig string
	for i, r := range nodeRoles {
		fmt.Fprintf(&b, "- role: %s\n", r.role)
		if image != "" {
			fmt.Fprintf(&b, "  image: %s\n", image)
		}
		if !c.Offline {
			continue // kind's published image: its own CNI, and kind's systemd driver everywhere
		}
		cni := filepath.Join(dir, fmt.Sprintf("cni-%d.conflist", i))
		if err := os.WriteFile(cni, []byte(bridgeConflist(fmt.Sprintf("10.244.%d.0/24", 250+i))), 0o644); err != nil {
			return "", err
		}
		b.WriteString("  extraMounts:\n")
		fmt.Fprintf(&b, "  - {hostPath: %s, containerPath: /etc/cni/net.d/10-numapref-kind.conflist, readOnly: true}\n", cni)
		if !r.cgroupfs {
			continue
		}
		// This node runs kubelet and containerd with the cgroupfs driver: containerd's
		// configuration is the image's own with SystemdCgroup off, kubelet gets
		// --cgroup-driver (its flag wins over the cluster's KubeletConfiguration, which
		// kind sets to systemd).
		if cgroupfsConfig == "" {
			var err error
			if cgroupfsConfig, err = c.cgroupfsContainerdConfig(ctx, image, dir); err != nil {
				return "", err
			}
		}
		fmt.Fprintf(&b, "  - {hostPath: %s, containerPath: /etc/containerd/config.toml, readOnly: true}\n", cgroupfsConfig)
		b.WriteString(`  kubeadmConfigPatchesJSON6902:
  - group: kubeadm.k8s.io
    version: v1beta4
    kind: JoinConfiguration
    patch: |
      - op: add
        path: /nodeRegistration/kubeletExtraArgs/-
        value: {name: cgroup-driver, value: cgroupfs}
`)
	}
	path := filepath.Join(dir, "kind.yaml")
	return path, os.WriteFile(path, []byte(b.String()), 0o644)
}

// bridgeConflist is one node's CNI configuration: a bridge with host-local addresses from
// subnet. Pods reach their own node; no route joins the nodes' pod networks, which the suite
// does not need (the agents use the host network).
func bridgeConflist(subnet string) string {
	return fmt.Sprintf(`{
  "cniVersion": "1.0.0",
  "name": "numapref-kind",
  "plugins": [
    {"type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": false,
     "ipam": {"type": "host-local", "ranges": [[{"subnet": %q}]]}}
  ]
}
`, subnet)
}

// cgroupfsContainerdConfig writes the node image's containerd configuration with the
// systemd cgroup driver turned off, and returns its path.
func (c *Cluster) cgroupfsContainerdConfig(ctx context.Context, image, dir string) (string, error) {
	conf, err := c.docker(ctx, "run", "--rm", "--network", "none", "--entrypoint", "cat", image, "/etc/containerd/config.toml")
	if err != nil {
		return "", err
	}
	const on = "SystemdCgroup = true"
	if !strings.Contains(conf, on) {
		return "", fmt.Errorf("the containerd configuration of %s has no %q to turn off", image, on)
	}
	path := filepath.Join(dir, "containerd-cgroupfs.toml")
	return path, os.WriteFile(path, []byte(strings.ReplaceAll(conf, on, "SystemdCgroup = false")), 0o644)
}

// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package localnode

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// The node's fixed addresses: every listener on 127.0.0.1.
const (
	etcdClientPort = 23790
	etcdPeerPort   = 23800
	apiserverPort  = 6443
	bridgeName     = "numapref0"
	podSubnet      = "10.244.77.0/24"
	serviceRange   = "10.0.0.0/24"
)

// identities are the token users of the control plane and of the person running tests.
// The controller manager runs its controllers under its own identity, which only
// system:masters covers without per-controller service accounts; this is a throwaway
// single-node cluster.
var identities = []struct {
	name, user string
	groups     []string
}{
	{"admin", "numapref-admin", []string{"system:masters"}},
	{"kube-controller-manager", "system:kube-controller-manager", []string{"system:masters"}},
	{"kube-scheduler", "system:kube-scheduler", nil},
	{"kubelet", "system:node:" + NodeName, []string{"system:nodes"}},
}

func (n *Node) writeConfig(hostIP string) error {
	d := n.Dir
	for _, sub := range []string{"logs", "etcd", "kubelet/root", "kubelet/pod-logs", "kubelet/manifests", "containerd/root", "containerd/state", "cni/net.d", "cni/ipam"} {
		if err := os.MkdirAll(filepath.Join(d, sub), 0o755); err != nil {
			return err
		}
	}
	var tokens strings.Builder
	for _, id := range identities {
		tok, err := randomToken()
		if err != nil {
			return err
		}
		fmt.Fprintf(&tokens, "%s,%s,%s,%q\n", tok, id.user, id.user, strings.Join(id.groups, ","))
		if err := writeFile(filepath.Join(d, id.name+".kubeconfig"), kubeconfig(filepath.Join(d, "pki/ca.crt"), tok)); err != nil {
			return err
		}
	}
	if err := writeFile(filepath.Join(d, "tokens.csv"), tokens.String()); err != nil {
		return err
	}
	containerd := containerdConfig(d)
	if n.RuntimeDir != "" {
		containerd = ContainerdConfigV3(d, n.RuntimeDir, ContainerdOptions{})
		for _, sub := range []string{"nri/plugins", "nri/conf.d"} {
			if err := os.MkdirAll(filepath.Join(d, sub), 0o755); err != nil {
				return err
			}
		}
	}
	files := map[string]string{
		"containerd/config.toml": containerd,
		"kubelet/config.yaml":    kubeletConfig(d, hostIP),
		"cni/net.d/10-numapref.conflist": fmt.Sprintf(`{
  "cniVersion": "1.0.0",
  "name": "numapref-local",
  "plugins": [
    {"type": "bridge", "bridge": %q, "isGateway": false, "ipMasq": false, "hairpinMode": false,
     "ipam": {"type": "host-local", "dataDir": %q, "ranges": [[{"subnet": %q}]]}},
    {"type": "loopback"}
  ]
}
`, bridgeName, filepath.Join(d, "cni/ipam"), podSubnet),
	}
	for name, content := range files {
		if err := writeFile(filepath.Join(d, name), content); err != nil {
			return err
		}
	}
	return nil
}

func writeFile(path, content string) error { return os.WriteFile(path, []byte(content), 0o600) }

func kubeconfig(caFile, token string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: local
  cluster:
    server: https://127.0.0.1:%d
    certificate-authority: %s
users:
- name: local
  user:
    token: %s
contexts:
- name: local
  context: {cluster: local, user: local}
current-context: local
`, apiserverPort, caFile, token)
}

// containerdConfig keeps containerd's root, state and sockets under the node's directory.
// restrict_oom_score_adj: this VM has no CAP_SYS_RESOURCE, so runc may not lower
// oom_score_adj; without it every sandbox fails ("can't get final child's PID from pipe").
func containerdConfig(d string) string {
	return containerdTop(d, 2) + fmt.Sprintf(`
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %[1]q
  restrict_oom_score_adj = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  disable_apparmor = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = %[2]q
`, PauseImage, filepath.Join(d, "cni/net.d"))
}

// containerdTop is the start of both configs: the config version, then root, state and
// the sockets in the node's directory d (the top-level tables versions 2 and 3 share).
func containerdTop(d string, version int) string {
	return fmt.Sprintf(`version = %d
root = %q
state = %q

[grpc]
  address = %q

[ttrpc]
  address = %q
`, version, filepath.Join(d, "containerd/root"), filepath.Join(d, "containerd/state"), n(d).ContainerdSocket(),
		n(d).ContainerdSocket()+".ttrpc")
}

// ContainerdOptions are the settings of a containerd 2.x config (ContainerdConfigV3) that
// differ between the local node, which takes the zero value, and the kernel lab's VM
// (test/kernellab/agent), which runs containerd from an initramfs.
type ContainerdOptions struct {
	// Snapshotter is the CRI's snapshotter; empty: overlayfs. "native" copies layers and
	// needs no overlay filesystem in the kernel.
	Snapshotter string
	// NoPivotRoot has runc jail a container with MS_MOVE and chroot: pivot_root(2) refuses a
	// root that is the initramfs, the root mount, which has no parent.
	NoPivotRoot bool
}

// ContainerdConfigV3 is containerdConfig for containerd 2.x (hack/runtime-binaries.sh, the
// binaries in runtimeDir), in config version 3, which every 2.x release reads (2.4 migrates
// it to its own version 4). The same settings under the plugins that hold them since 2.0:
// the CRI runtime (io.containerd.cri.v1.runtime), its images (io.containerd.cri.v1.images:
// the sandbox image is the pinned image "sandbox") and its gRPC service with the stream
// server (io.containerd.grpc.v1.cri). The shim and runc are named by absolute path, so
// Debian's, also on PATH, are never picked. NRI is on, with its socket, plugin and plugin
// config dirs in the node's directory d (not /var/run/nri, /opt/nri, /etc/nri), and so is
// the opt plugin's directory (not /opt/containerd).
func ContainerdConfigV3(d, runtimeDir string, o ContainerdOptions) string {
	snapshotter := o.Snapshotter
	if snapshotter == "" {
		snapshotter = "overlayfs"
	}
	return containerdTop(d, 3) + fmt.Sprintf(`
[plugins."io.containerd.cri.v1.images"]
  snapshotter = %[9]q
  [plugins."io.containerd.cri.v1.images".pinned_images]
    sandbox = %[1]q

[plugins."io.containerd.cri.v1.runtime"]
  restrict_oom_score_adj = true
  disable_apparmor = true
  [plugins."io.containerd.cri.v1.runtime".containerd]
    default_runtime_name = "runc"
    [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      runtime_path = %[3]q
      [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
        BinaryName = %[4]q
        SystemdCgroup = false
        NoPivotRoot = %[10]t
  [plugins."io.containerd.cri.v1.runtime".cni]
    bin_dirs = ["/usr/lib/cni"]
    conf_dir = %[2]q

[plugins."io.containerd.grpc.v1.cri"]
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"

[plugins."io.containerd.internal.v1.opt"]
  path = %[5]q

[plugins."io.containerd.nri.v1.nri"]
  disable = false
  socket_path = %[6]q
  plugin_path = %[7]q
  plugin_config_path = %[8]q
  plugin_registration_timeout = "5s"
  plugin_request_timeout = "2s"
`, PauseImage, filepath.Join(d, "cni/net.d"),
		filepath.Join(runtimeDir, "containerd-shim-runc-v2"), filepath.Join(runtimeDir, "runc"),
		filepath.Join(d, "containerd/opt"), nriSocket(d), filepath.Join(d, "nri/plugins"), filepath.Join(d, "nri/conf.d"),
		snapshotter, o.NoPivotRoot)
}

// kubeletConfig: the settings these machines need (LAB-NOTES): cgroupfs on the cgroup v1
// host (failCgroupV1: false, or 1.35+ refuses to start), oomScoreAdj 0 (no
// CAP_SYS_RESOURCE), no iptables utility chains, webhook authentication and authorization
// against the apiserver, and listeners on 127.0.0.1 but for the API port: that one is on
// hostIP, the node's InternalIP, where kube-apiserver dials kubelet for kubectl logs, exec
// and port-forward (--kubelet-preferred-address-types; the node's Hostname address,
// numapref-local, resolves nowhere). It takes only clients the apiserver authenticates.
// It runs the static pods of StaticPodDir, with or without the apiserver.
func kubeletConfig(d, hostIP string) string {
	return fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: %s
port: 10250
healthzBindAddress: 127.0.0.1
healthzPort: 10248
readOnlyPort: 0
cgroupDriver: cgroupfs
cgroupsPerQOS: true
failSwapOn: false
failCgroupV1: false
oomScoreAdj: 0
makeIPTablesUtilChains: false
containerRuntimeEndpoint: unix://%s
podLogsDir: %s
staticPodPath: %s
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: %s}
authorization: {mode: Webhook}
evictionHard: {memory.available: "100Mi", nodefs.available: "2%%", imagefs.available: "2%%"}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
serializeImagePulls: false
maxPods: 250
`, hostIP, n(d).ContainerdSocket(), n(d).PodLogsDir(), n(d).StaticPodDir(), filepath.Join(d, "pki/ca.crt"))
}

// n makes a Node value for path helpers that only need the directory.
func n(d string) *Node { return &Node{Dir: d} }

// ContainerdSocket is where containerd serves its API and CRI for a node in n.Dir.
func (n *Node) ContainerdSocket() string { return filepath.Join(n.Dir, "containerd/containerd.sock") }

// KubeletDir is the kubelet's root dir (--root-dir): its pod-resources socket, plugins and
// plugins_registry are there. (Its device-plugins directory is always
// /var/lib/kubelet/device-plugins.)
func (n *Node) KubeletDir() string { return filepath.Join(n.Dir, "kubelet/root") }

// nriSocket is where containerd 2.x serves NRI for a node in d.
func nriSocket(d string) string { return filepath.Join(d, "nri/nri.sock") }

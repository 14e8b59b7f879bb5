// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/numapref/numapref/internal/nodeagent/nri"
	"github.com/numapref/numapref/test/kindnode"
	"github.com/numapref/numapref/test/localnode"
)

// provider is a cluster the specs run on. The specs only need a kubeconfig, a way to get
// the images onto the nodes, a shell on a node (to read /proc and the emulator's task view,
// and to signal workloads), and the agents' logs when something fails. Everything else is
// shared.
type provider interface {
	up(ctx context.Context, images []string) (kubeconfig string, err error)
	// nodes are the cluster's Kubernetes nodes; the single-node specs run on the first.
	nodes() []string
	// nodeShell runs a POSIX shell script on a node, in the node's pid namespace.
	nodeShell(ctx context.Context, node, script string) (string, error)
	// agentLogs returns the agent containers' logs.
	agentLogs(ctx context.Context) string
	// agentURL is where kubectl numapref reaches the agent, when its discovery (the
	// node's address) cannot.
	agentURL() string
	// values are the Helm values this cluster needs beyond the common ones.
	values() []string
	// nri is true when the nodes' container runtime serves NRI and the agent is installed
	// as its plugin (the specs labelled "nri").
	nri() bool
	// kubeletDir is the kubelet's root dir on the nodes (its pod-resources, plugins and
	// plugins_registry directories).
	kubeletDir() string
	// restartRuntime stops the primary node's container runtime and starts it again; the
	// containers and their shims keep running. It returns once the runtime serves again.
	restartRuntime(ctx context.Context) error
	down(ctx context.Context) error
}

// primaryNode is where the single-node specs place their pods.
func primaryNode() string { return prov.nodes()[0] }

// nodeShell runs a script on the primary node.
func nodeShell(ctx context.Context, script string) (string, error) {
	return prov.nodeShell(ctx, primaryNode(), script)
}

func newProvider(name string) (provider, error) {
	switch name {
	case "", "local":
		bin := os.Getenv("E2E_BIN_DIR")
		if bin == "" {
			return nil, fmt.Errorf("E2E_BIN_DIR must name the Kubernetes binaries (hack/k8s-binaries.sh all)")
		}
		// E2E_RUNTIME_DIR (hack/runtime-binaries.sh): containerd 2.x with NRI and runc;
		// else Debian's containerd 1.6, which has no NRI.
		return &localProvider{binDir: bin, dir: envOr("E2E_NODE_DIR", localnode.DefaultDir), runtimeDir: os.Getenv("E2E_RUNTIME_DIR")}, nil
	case "kind":
		repo, err := filepath.Abs("../..") // the test runs in test/e2e
		if err != nil {
			return nil, err
		}
		return &kindProvider{repo: repo, opts: kindnode.Options{
			Name: envOr("E2E_KIND_CLUSTER", "numapref-e2e"), Kind: envOr("KIND", "kind"),
			NodeImage: os.Getenv("E2E_KIND_NODE_IMAGE"), OwnDocker: os.Getenv("E2E_KIND_OWN_DOCKER") == "1",
		}}, nil
	}
	return nil, fmt.Errorf("unknown E2E_PROVIDER %q (local or kind)", name)
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// localProvider is a real node on this machine (test/localnode).
type localProvider struct {
	binDir, dir, runtimeDir string
	node                    *localnode.Node
}

func (p *localProvider) up(ctx context.Context, images []string) (string, error) {
	// A kind cluster orphaned by a killed run would keep the node from starting.
	if _, err := kindnode.ReclaimOrphan(ctx, kindnode.DefaultDir, logf); err != nil {
		return "", err
	}
	n, err := localnode.UpRuntime(ctx, p.dir, p.binDir, p.runtimeDir, images, logf)
	p.node = n
	if err != nil {
		return "", err
	}
	return n.Kubeconfig(), nil
}

func (p *localProvider) nodes() []string { return []string{localnode.NodeName} }

func (p *localProvider) nodeShell(ctx context.Context, _, script string) (string, error) {
	out, err := exec.CommandContext(ctx, "sh", "-c", script).CombinedOutput()
	return string(out), err
}

func (p *localProvider) agentLogs(context.Context) string {
	// kubelet's files, not kubectl logs: this runs when a spec failed, maybe because the
	// API server or kubelet did (the monitoring spec checks kubectl logs itself).
	var b strings.Builder
	dirs, _ := filepath.Glob(filepath.Join(p.node.PodLogsDir(), "*_numapref-agent-*", "agent", "*.log"))
	for _, f := range dirs {
		data, _ := os.ReadFile(f)
		fmt.Fprintf(&b, "==> %s\n%s\n", f, data)
	}
	return b.String()
}

func (p *localProvider) values() []string {
	// The kubelet's PodResources socket is under its root dir, which is the node's.
	v := append(localnode.ChartValues(), "podResources.socket="+filepath.Join(p.kubeletDir(), "pod-resources", "kubelet.sock"))
	if !p.nri() {
		return v
	}
	return append(v, "nri.enabled=true", "nri.socket="+p.node.NRISocket())
}

func (p *localProvider) kubeletDir() string { return p.node.KubeletDir() }

func (p *localProvider) nri() bool { return p.runtimeDir != "" }

func (p *localProvider) restartRuntime(ctx context.Context) error { return p.node.RestartRuntime(ctx) }

// The agent listens on 127.0.0.1 only (bindAddress), not on the node's address.
func (p *localProvider) agentURL() string { return "https://127.0.0.1:8443" }

func (p *localProvider) down(context.Context) error {
	if p.node == nil {
		return nil
	}
	return p.node.Down(logf)
}

// kindProvider is a three-node kind cluster (test/kindnode): plain kind where the machine
// runs Docker and can pull kind's node image; elsewhere a dockerd of its own and the node
// image of hack/kind/node-image.sh (E2E_KIND_NODE_IMAGE). The single-node specs run on the
// first worker (systemd cgroup driver); the multi-node specs use all three.
type kindProvider struct {
	repo    string // the repository, for make image
	opts    kindnode.Options
	cluster *kindnode.Cluster
	apiHost string // the control plane's address on the nodes' network
	nriOn   bool   // every node's runtime serves NRI at the chart's default socket
}

func (p *kindProvider) up(ctx context.Context, images []string) (string, error) {
	c, err := kindnode.Up(ctx, p.opts, logf)
	if err != nil {
		return "", err
	}
	p.cluster = c
	// The agent's image as an operator builds it, from the Dockerfile (make image), in
	// place of the one the local node builds without an engine.
	images = slices.Clone(images)
	for i, t := range images {
		if filepath.Base(t) == localnode.TarballName(localnode.AgentImage) {
			images[i] = filepath.Join(c.Dir, "agent-image.tar")
			if err := c.BuildImage(ctx, p.repo, localnode.AgentImage, images[i]); err != nil {
				return "", err
			}
		}
	}
	if err := c.LoadImages(ctx, images); err != nil {
		return "", err
	}
	if p.apiHost, err = c.NodeIP(ctx, c.Nodes()[0]); err != nil {
		return "", err
	}
	// The offline node image's containerd serves NRI (hack/kind/node-image.sh); another
	// image (kind's published one, E2E_KIND_NODE_IMAGE) may not, and the chart with NRI
	// on would mount a directory such a node lacks.
	p.nriOn = true
	for _, n := range c.Nodes() {
		if _, err := c.Exec(ctx, n, "test -S "+nri.DefaultSocket); err != nil {
			logf("node %s: no NRI socket at %s: the agents run without NRI, and the specs labelled nri fail", n, nri.DefaultSocket)
			p.nriOn = false
		}
	}
	return c.Kubeconfig(), nil
}

// nodes puts the workers first: the systemd one, then the cgroupfs one, then the control
// plane.
func (p *kindProvider) nodes() []string {
	n := p.cluster.Nodes()
	return append(n[1:], n[0])
}

func (p *kindProvider) nodeShell(ctx context.Context, node, script string) (string, error) {
	return p.cluster.Exec(ctx, node, script)
}

func (p *kindProvider) agentLogs(ctx context.Context) string {
	out, _ := kubectl(ctx, "logs", "-n", agentNamespace, "-l", "app.kubernetes.io/name=numapref", "--all-containers", "--prefix", "--tail=-1")
	return out
}

// values: kind's kubelets use the cgroup root /kubelet (kubelet.slice with systemd), and the
// agents (host network) reach the API server at the control plane's address, which works
// with or without kube-proxy (the offline node image has none).
func (p *kindProvider) values() []string {
	// The summarizer's two replicas, on the host network as the agents (the control plane's
	// address is the nodes'), go one to each worker.
	v := []string{"kubeletCgroupRoot=/kubelet", "apiServer.host=" + p.apiHost, "apiServer.port=6443", "summarizer.hostNetwork=true"}
	if p.nriOn {
		// The nodes' containerd serves NRI at the chart's default socket.
		v = append(v, "nri.enabled=true")
	}
	return v
}

func (p *kindProvider) agentURL() string { return "" }

func (p *kindProvider) kubeletDir() string { return "/var/lib/kubelet" }

// nri: the offline node image runs containerd 2.x with NRI on (hack/kind/node-image.sh);
// up checks every node for its socket.
func (p *kindProvider) nri() bool { return p.nriOn }

// restartRuntime: systemd's restart of a Type=notify unit returns once containerd says it
// is ready; kind's unit has KillMode=process, so the shims stay.
func (p *kindProvider) restartRuntime(ctx context.Context) error {
	if out, err := p.cluster.Exec(ctx, primaryNode(), "systemctl restart containerd"); err != nil {
		return fmt.Errorf("restarting containerd on %s: %w: %s", primaryNode(), err, out)
	}
	return nil
}

func (p *kindProvider) down(ctx context.Context) error {
	if p.cluster == nil {
		return nil
	}
	return p.cluster.Down(ctx, logf)
}

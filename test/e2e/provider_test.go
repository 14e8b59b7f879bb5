//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/numapref/numapref/test/localnode"
)

// provider is a cluster the specs run on. The specs only need a kubeconfig, a way to get
// the images onto the node, a shell on the node (to read /proc and the emulator's task
// view, and to signal workloads), and the agent's logs when something fails. Everything
// else is shared.
type provider interface {
	up(ctx context.Context, images []string) (kubeconfig string, err error)
	// nodeShell runs a POSIX shell script on the node, in the node's pid namespace.
	nodeShell(ctx context.Context, script string) (string, error)
	// agentLogs returns the agent containers' logs.
	agentLogs(ctx context.Context) string
	// agentURL is where kubectl numapref reaches the agent, when its discovery (the
	// node's address) cannot.
	agentURL() string
	// values are the Helm values this cluster needs beyond the common ones.
	values() []string
	down(ctx context.Context) error
}

func newProvider(name string) (provider, error) {
	switch name {
	case "", "local":
		bin := os.Getenv("E2E_BIN_DIR")
		if bin == "" {
			return nil, fmt.Errorf("E2E_BIN_DIR must name the Kubernetes binaries (hack/k8s-binaries.sh all)")
		}
		return &localProvider{binDir: bin, dir: envOr("E2E_NODE_DIR", localnode.DefaultDir)}, nil
	case "kind":
		return &kindProvider{cluster: envOr("E2E_KIND_CLUSTER", "numapref-e2e")}, nil
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
	binDir, dir string
	node        *localnode.Node
}

func (p *localProvider) up(ctx context.Context, images []string) (string, error) {
	n, err := localnode.Up(ctx, p.dir, p.binDir, images, logf)
	p.node = n
	if err != nil {
		return "", err
	}
	return n.Kubeconfig(), nil
}

func (p *localProvider) nodeShell(ctx context.Context, script string) (string, error) {
	out, err := exec.CommandContext(ctx, "sh", "-c", script).CombinedOutput()
	return string(out), err
}

func (p *localProvider) agentLogs(context.Context) string {
	// kube-apiserver reaches kubelet at the node's address, where nothing listens (every
	// listener is on 127.0.0.1), so `kubectl logs` cannot work here: read kubelet's files.
	var b strings.Builder
	dirs, _ := filepath.Glob(filepath.Join(p.node.PodLogsDir(), "*_numapref-agent-*", "agent", "*.log"))
	for _, f := range dirs {
		data, _ := os.ReadFile(f)
		fmt.Fprintf(&b, "==> %s\n%s\n", f, data)
	}
	return b.String()
}

func (p *localProvider) values() []string {
	// No kube-proxy: the agent (host network) reaches the apiserver at 127.0.0.1, and its
	// listeners stay there too.
	return []string{"apiServer.host=127.0.0.1", "apiServer.port=6443", "bindAddress=127.0.0.1"}
}

// The agent listens on 127.0.0.1 only (bindAddress), not on the node's address.
func (p *localProvider) agentURL() string { return "https://127.0.0.1:8443" }

func (p *localProvider) down(context.Context) error {
	if p.node == nil {
		return nil
	}
	return p.node.Down(logf)
}

// kindProvider is a kind cluster, for machines with Docker. It cannot run on the machines
// this project is developed on (no Docker engine); it shares every spec with the local
// provider and differs only in these five methods.
type kindProvider struct{ cluster string }

func (p *kindProvider) up(ctx context.Context, images []string) (string, error) {
	kubeconfig := filepath.Join(os.TempDir(), "numapref-e2e-kind.kubeconfig")
	if out, err := exec.CommandContext(ctx, "kind", "create", "cluster", "--name", p.cluster, "--kubeconfig", kubeconfig).CombinedOutput(); err != nil {
		return "", fmt.Errorf("kind create cluster: %v: %s", err, out)
	}
	for _, img := range images {
		if out, err := exec.CommandContext(ctx, "kind", "load", "image-archive", img, "--name", p.cluster).CombinedOutput(); err != nil {
			return "", fmt.Errorf("kind load image-archive %s: %v: %s", img, err, out)
		}
	}
	return kubeconfig, nil
}

func (p *kindProvider) nodeShell(ctx context.Context, script string) (string, error) {
	out, err := exec.CommandContext(ctx, "docker", "exec", p.cluster+"-control-plane", "sh", "-c", script).CombinedOutput()
	return string(out), err
}

func (p *kindProvider) agentLogs(ctx context.Context) string {
	out, _ := kubectl(ctx, "logs", "-n", agentNamespace, "-l", "app.kubernetes.io/name=numapref", "--all-containers", "--tail=-1")
	return out
}

func (p *kindProvider) values() []string { return []string{"kubeletCgroupRoot=/kubelet"} }

func (p *kindProvider) agentURL() string { return "" }

func (p *kindProvider) down(ctx context.Context) error {
	return exec.CommandContext(ctx, "kind", "delete", "cluster", "--name", p.cluster).Run()
}

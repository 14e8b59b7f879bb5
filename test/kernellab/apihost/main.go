// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

// Command apihost is the kernel lab's control plane on the host: the project's own etcd
// and kube-apiserver builds (hack/k8s-binaries.sh), reached by the agent in the lab VM
// through qemu's user network with restrict=on and one guestfwd.
//
//	apihost serve -dir DIR -bin BINDIR -repo REPO -nodes a,b
//	    starts etcd and kube-apiserver on free ports of 127.0.0.1, installs the CRDs
//	    and the agent's RBAC (config/crd, config/rbac, the node restriction policy
//	    included), creates the Nodes and, for each, a Pod of the agent's ServiceAccount
//	    bound to it and a token bound to that Pod (the node-name claim the policy
//	    checks), writes DIR/guest/{admin,agent-<node>}.kubeconfig for the VM (server
//	    https://10.0.2.100:6443, the guestfwd address) and DIR/ready (the port), runs
//	    the summarizer under its own ServiceAccount, as the chart's Deployment does, and
//	    runs until SIGTERM or SIGINT; then it stops both by pid and removes DIR's data.
//	apihost fwd HOST:PORT
//	    what the guestfwd runs for each guest connection: stdin and stdout are the
//	    connection, copied both ways to HOST:PORT.
package main

import (
	"context"
	"crypto/rand"
	b64 "encoding/base64"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
	"github.com/numapref/numapref/controllers/summarizer"
	"github.com/numapref/numapref/internal/testutil/poll"
	"github.com/numapref/numapref/test/localnode"
)

// guestServer is where the VM reaches the apiserver: qemu's guestfwd address.
const (
	guestAddr = "10.0.2.100"
	guestPort = 6443
	agentNS   = "numapref-system"
	agentSA   = "numapref-agent"
	// summarizerSA is the summarizer's (config/rbac): apihost runs the summarizer under it.
	summarizerSA = "numapref-summarizer"
	tokenHours   = 6
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: apihost serve -dir DIR -bin BINDIR -repo REPO -nodes a,b | apihost fwd HOST:PORT")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "serve":
		err = serve(os.Args[2:])
	case "fwd":
		if len(os.Args) != 3 {
			err = errors.New("fwd takes HOST:PORT")
		} else {
			err = forward(os.Args[2], os.Stdin, os.Stdout)
		}
	default:
		err = fmt.Errorf("unknown command %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "apihost:", err)
		os.Exit(1)
	}
}

// forward copies in to a connection to addr and the connection to out until either side
// ends.
func forward(addr string, in io.Reader, out io.Writer) error {
	conn, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		return err
	}
	defer conn.Close()
	done := make(chan error, 2)
	go func() {
		_, err := io.Copy(conn, in)
		_ = conn.(*net.TCPConn).CloseWrite()
		done <- err
	}()
	go func() {
		_, err := io.Copy(out, conn)
		done <- err
	}()
	return <-done
}

type host struct {
	dir, bin, repo string
	port           int
	adminToken     string
	pids           map[string]int
}

func serve(args []string) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	dir := fs.String("dir", "", "working directory (created; its data is removed at exit)")
	bin := fs.String("bin", "", "directory with etcd, kube-apiserver and kubectl")
	repo := fs.String("repo", ".", "the repository (config/crd, config/rbac)")
	nodes := fs.String("nodes", "", "comma-separated Node names, one agent identity each")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *dir == "" || *bin == "" || *nodes == "" {
		return errors.New("serve needs -dir, -bin and -nodes")
	}
	h := &host{dir: *dir, bin: *bin, repo: *repo, pids: map[string]int{}}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	defer h.stop()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	start := time.Now()
	if err := h.start(ctx); err != nil {
		return err
	}
	if err := h.provision(ctx, strings.Split(*nodes, ",")); err != nil {
		return err
	}
	runCtx, stopSummarizer := context.WithCancel(context.Background())
	summarizerDone, err := h.startSummarizer(ctx, runCtx)
	if err != nil {
		stopSummarizer()
		return err
	}
	if err := os.WriteFile(filepath.Join(h.dir, "ready"), []byte(strconv.Itoa(h.port)+"\n"), 0o644); err != nil {
		stopSummarizer()
		return err
	}
	fmt.Fprintf(os.Stderr, "apihost: kube-apiserver on 127.0.0.1:%d ready and provisioned after %s\n", h.port, time.Since(start).Round(time.Millisecond))
	<-sig
	stopSummarizer()
	return <-summarizerDone
}

// startSummarizer runs the summarizer here, as the chart's Deployment runs it: under its
// own ServiceAccount (config/rbac), the only one with rights on the preferences' status and
// the summary lease, campaigning for that lease. It stops when run ends.
func (h *host) startSummarizer(ctx, run context.Context) (<-chan error, error) {
	token, err := h.kubectl(ctx, nil, "create", "token", summarizerSA, "-n", agentNS, fmt.Sprintf("--duration=%dh", tokenHours))
	if err != nil {
		return nil, err
	}
	cfg := &rest.Config{Host: fmt.Sprintf("https://127.0.0.1:%d", h.port), BearerToken: strings.TrimSpace(token),
		TLSClientConfig: rest.TLSClientConfig{CAFile: filepath.Join(h.dir, "pki", "ca.crt")}}
	scheme := runtime.NewScheme()
	if err := numav1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, err
	}
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr)))
	election := summarizer.ElectionOptions{Namespace: agentNS, ID: "numapref-summary",
		LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 2 * time.Second}
	done := make(chan error, 1)
	go func() {
		done <- summarizer.RunSummarizer(cfg, scheme, election, summarizer.SummaryOptions{}).Start(run)
	}()
	return done, nil
}

func (h *host) start(ctx context.Context) error {
	for _, sub := range []string{"logs", "etcd", "guest"} {
		if err := os.MkdirAll(filepath.Join(h.dir, sub), 0o700); err != nil {
			return err
		}
	}
	ports, err := freePorts(3)
	if err != nil {
		return err
	}
	etcdClient, etcdPeer := ports[0], ports[1]
	h.port = ports[2]
	pki := filepath.Join(h.dir, "pki")
	if err := localnode.WritePKI(pki, []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP(guestAddr)}); err != nil {
		return err
	}
	if h.adminToken, err = randomHex(16); err != nil {
		return err
	}
	tokens := fmt.Sprintf("%s,kernellab-admin,kernellab-admin,\"system:masters\"\n", h.adminToken)
	if err := os.WriteFile(filepath.Join(h.dir, "tokens.csv"), []byte(tokens), 0o600); err != nil {
		return err
	}
	for name, server := range map[string]string{
		"host.kubeconfig":        fmt.Sprintf("https://127.0.0.1:%d", h.port),
		"guest/admin.kubeconfig": fmt.Sprintf("https://%s:%d", guestAddr, guestPort),
	} {
		if err := h.writeKubeconfig(name, server, h.adminToken); err != nil {
			return err
		}
	}
	etcdURL := func(p int) string { return fmt.Sprintf("http://127.0.0.1:%d", p) }
	if err := h.run("etcd", filepath.Join(h.bin, "etcd"),
		"--name=kernellab", "--data-dir="+filepath.Join(h.dir, "etcd"),
		"--listen-client-urls="+etcdURL(etcdClient), "--advertise-client-urls="+etcdURL(etcdClient),
		"--listen-peer-urls="+etcdURL(etcdPeer), "--initial-advertise-peer-urls="+etcdURL(etcdPeer),
		"--initial-cluster=kernellab="+etcdURL(etcdPeer), "--log-level=warn"); err != nil {
		return err
	}
	p := func(f string) string { return filepath.Join(pki, f) }
	if err := h.run("kube-apiserver", filepath.Join(h.bin, "kube-apiserver"),
		"--etcd-servers="+etcdURL(etcdClient),
		"--bind-address=127.0.0.1", "--secure-port="+strconv.Itoa(h.port),
		// Loopback as the advertised address needs the endpoint reconciler off (>= 1.35).
		"--advertise-address=127.0.0.1", "--endpoint-reconciler-type=none",
		"--service-cluster-ip-range=10.0.0.0/24",
		"--tls-cert-file="+p("apiserver.crt"), "--tls-private-key-file="+p("apiserver.key"),
		"--client-ca-file="+p("ca.crt"), "--token-auth-file="+filepath.Join(h.dir, "tokens.csv"),
		"--authorization-mode=RBAC",
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-account-key-file="+p("sa.pub"), "--service-account-signing-key-file="+p("sa.key"),
		"--profiling=false"); err != nil {
		return err
	}
	return waitFor(ctx, "the apiserver's /readyz", func() error {
		_, err := h.kubectl(ctx, nil, "get", "--raw", "/readyz")
		return err
	})
}

// provision installs what a cluster with the chart would have (CRDs, the agent's RBAC and
// node restriction policy) and one agent identity per node.
func (h *host) provision(ctx context.Context, nodes []string) error {
	steps := [][]string{
		{"apply", "-f", filepath.Join(h.repo, "config/crd/bases")},
		{"create", "namespace", agentNS},
		{"apply", "-n", agentNS, "-k", filepath.Join(h.repo, "config/rbac")},
		{"wait", "--for=condition=Established", "--timeout=60s", "crd/numapreferences.numa.numapref.io", "crd/numanodereports.numa.numapref.io"},
	}
	for _, s := range steps {
		if _, err := h.kubectl(ctx, nil, s...); err != nil {
			return err
		}
	}
	for _, node := range nodes {
		manifest := fmt.Sprintf(`apiVersion: v1
kind: Node
metadata:
  name: %[1]s
  labels: {kubernetes.io/hostname: %[1]s}
---
apiVersion: v1
kind: Pod
metadata: {name: agent-%[1]s, namespace: %[2]s}
spec:
  nodeName: %[1]s
  serviceAccountName: %[3]s
  automountServiceAccountToken: false
  containers: [{name: agent, image: numapref.local/agent:kernellab}]
`, node, agentNS, agentSA)
		if _, err := h.kubectl(ctx, strings.NewReader(manifest), "create", "-f", "-"); err != nil {
			return err
		}
		// A token bound to the agent's Pod carries the Pod's node name, as kubelet's
		// projected token does: the node restriction policy lets it write only that
		// node's report and labels.
		token, err := h.kubectl(ctx, nil, "create", "token", agentSA, "-n", agentNS,
			"--bound-object-kind=Pod", "--bound-object-name=agent-"+node, fmt.Sprintf("--duration=%dh", tokenHours))
		if err != nil {
			return err
		}
		server := fmt.Sprintf("https://%s:%d", guestAddr, guestPort)
		if err := h.writeKubeconfig("guest/agent-"+node+".kubeconfig", server, strings.TrimSpace(token)); err != nil {
			return err
		}
	}
	return nil
}

func (h *host) writeKubeconfig(name, server, token string) error {
	ca, err := os.ReadFile(filepath.Join(h.dir, "pki", "ca.crt"))
	if err != nil {
		return err
	}
	// The CA goes in inline: the VM has the file, not the host's path.
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: kernellab
  cluster:
    server: %s
    certificate-authority-data: %s
users:
- name: kernellab
  user:
    token: %s
contexts:
- name: kernellab
  context: {cluster: kernellab, user: kernellab}
current-context: kernellab
`, server, base64(ca), token)
	return os.WriteFile(filepath.Join(h.dir, name), []byte(cfg), 0o600)
}

func (h *host) kubectl(ctx context.Context, stdin io.Reader, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(h.bin, "kubectl"), append([]string{"--kubeconfig", filepath.Join(h.dir, "host.kubeconfig")}, args...)...)
	cmd.Stdin = stdin
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return string(out), nil
}

// run starts a daemon in its own session, its output in logs/<name>.log.
func (h *host) run(name, bin string, args ...string) error {
	log, err := os.Create(filepath.Join(h.dir, "logs", name+".log"))
	if err != nil {
		return err
	}
	defer log.Close()
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %w", name, err)
	}
	h.pids[name] = cmd.Process.Pid
	go cmd.Wait()
	return nil
}

// stop ends the apiserver, then etcd, each by its pid (SIGTERM, SIGKILL after 10 s), and
// removes the data directory; the logs stay.
func (h *host) stop() {
	for _, name := range []string{"kube-apiserver", "etcd"} {
		pid, ok := h.pids[name]
		if !ok {
			continue
		}
		syscall.Kill(pid, syscall.SIGTERM)
		_ = poll.Until(10*time.Second, func() error { // else SIGKILL, below
			if alive(pid) {
				return errors.New("still running")
			}
			return nil
		})
		if alive(pid) {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	os.RemoveAll(filepath.Join(h.dir, "etcd"))
}

// alive: pid exists and is not a zombie (cmd.Wait reaps it soon after it exits).
func alive(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := strings.LastIndexByte(string(stat), ')')
	return i < 0 || i+2 >= len(stat) || stat[i+2] != 'Z'
}

// freePorts asks the kernel for n distinct free ports on 127.0.0.1.
func freePorts(n int) ([]int, error) {
	var ports []int
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

func waitFor(ctx context.Context, what string, f func() error) error {
	if err := poll.Context(ctx, 250*time.Millisecond, f); err != nil {
		return fmt.Errorf("waiting for %s: %w", what, err)
	}
	return nil
}

func randomHex(n int) (string, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}

func base64(b []byte) string { return b64.StdEncoding.EncodeToString(b) }

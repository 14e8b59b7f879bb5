// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

// Package localnode runs a real single-node Kubernetes cluster on this machine, without
// Docker: etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kubelet built
// from k8s.io/kubernetes (hack/k8s-binaries.sh), containerd and runc from Debian (or, with
// a runtime dir, containerd 2.x with NRI and runc built by hack/runtime-binaries.sh), the
// CNI plugins from Debian, and images built from static binaries. Everything listens on
// 127.0.0.1 (but kubelet's API port, on the node's address, for kubectl logs and exec) and
// keeps its files under one directory; Down stops every process it started (by pid) and
// puts back what kubelet and containerd change on the host, and Leftovers checks that
// nothing stayed. One node per machine.
package localnode

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/numapref/numapref/internal/testutil/poll"
)

// NodeName is the local node's name.
const NodeName = "numapref-local"

// PauseImage is the sandbox image every pod runs (a static binary; see test/e2e/workload).
const PauseImage = "numapref.local/pause:e2e"

// DefaultDir is where a node keeps its files unless told otherwise.
const DefaultDir = "/var/tmp/numapref-local"

// KindRecord is where test/kindnode records a kind cluster while it is up.
const KindRecord = "/var/tmp/numapref-kind/cluster.json"

// HostInUse fails when a cluster of this project other than the one recorded at self is
// recorded as up on this machine. The local node and a kind cluster share what kubelet
// changes on the host (its sysctls, which are not per namespace) and what their teardowns
// put back, so they run one at a time.
func HostInUse(self string) error {
	for what, record := range map[string]string{
		"a local node":   filepath.Join(DefaultDir, "node.json"),
		"a kind cluster": KindRecord,
	} {
		if record == self {
			continue
		}
		if _, err := os.Stat(record); err == nil {
			return fmt.Errorf("%s is up on this machine (%s): take it down first", what, record)
		}
	}
	return nil
}

// Node is a running (or half-started) local node. Its record lives in <Dir>/node.json, so a
// later process can tear it down.
type Node struct {
	Dir    string `json:"dir"`
	BinDir string `json:"binDir"`
	// RuntimeDir holds containerd, containerd-shim-runc-v2, ctr and runc
	// (hack/runtime-binaries.sh: containerd 2.x, NRI on); empty: Debian's, from PATH.
	RuntimeDir string         `json:"runtimeDir,omitempty"`
	Pids       map[string]int `json:"pids"`
	Before     *HostState     `json:"before"`
	HostIP     string         `json:"hostIP"`
}

// runtimeTools are the container runtime's programs the node needs.
var runtimeTools = []string{"containerd", "containerd-shim-runc-v2", "runc", "ctr"}

// NRISocket is the socket where containerd serves NRI plugins; empty for Debian's
// containerd (1.6, no NRI).
func (n *Node) NRISocket() string {
	if n.RuntimeDir == "" {
		return ""
	}
	return nriSocket(n.Dir)
}

// runtimeBin is the path of one of runtimeTools: in RuntimeDir, or the name, found on PATH.
func (n *Node) runtimeBin(name string) string {
	if n.RuntimeDir == "" {
		return name
	}
	return filepath.Join(n.RuntimeDir, name)
}

// Kubeconfig is the admin kubeconfig (system:masters).
func (n *Node) Kubeconfig() string { return filepath.Join(n.Dir, "admin.kubeconfig") }

// PodLogsDir is where kubelet keeps container logs: <ns>_<pod>_<uid>/<container>/<n>.log.
func (n *Node) PodLogsDir() string { return filepath.Join(n.Dir, "kubelet/pod-logs") }

// StaticPodDir is where kubelet reads static pod manifests (staticPodPath).
func (n *Node) StaticPodDir() string { return filepath.Join(n.Dir, "kubelet/manifests") }

// PauseAPIServer stops kube-apiserver (SIGSTOP), as a partition from the control plane
// does: its connections stay open and nothing answers on them. ResumeAPIServer ends it.
// Teardown resumes it too.
func (n *Node) PauseAPIServer() error { return n.signal("kube-apiserver", syscall.SIGSTOP) }

// ResumeAPIServer lets a paused kube-apiserver run again (SIGCONT).
func (n *Node) ResumeAPIServer() error { return n.signal("kube-apiserver", syscall.SIGCONT) }

// signal sends sig to the node's daemon name.
func (n *Node) signal(name string, sig syscall.Signal) error {
	pid, ok := n.Pids[name]
	if !ok || !isDaemon(pid, n.Dir, daemons) {
		return fmt.Errorf("no %s of the node in %s runs", name, n.Dir)
	}
	return syscall.Kill(pid, sig)
}

// prefixes are the paths whose mounts belong to a node.
func (n *Node) prefixes() []string {
	return []string{n.Dir, "/run/containerd", "/var/lib/kubelet", netnsDir}
}

// Up starts a node in dir with the binaries of binDir and Debian's container runtime, and
// imports the image tarballs before kubelet starts (the pause image among them). It fails
// if a node already runs; on any error it tears down what it started.
func Up(ctx context.Context, dir, binDir string, images []string, logf func(string, ...any)) (*Node, error) {
	return UpRuntime(ctx, dir, binDir, "", images, logf)
}

// UpRuntime is Up with the container runtime of runtimeDir (hack/runtime-binaries.sh:
// containerd 2.x with NRI, runc), or Debian's from PATH when runtimeDir is empty.
func UpRuntime(ctx context.Context, dir, binDir, runtimeDir string, images []string, logf func(string, ...any)) (n *Node, err error) { //nolint:funlen // test tooling: the local node's components started in dependency order, each undone on failure
	if _, err := ReclaimOrphan(dir, logf); err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(dir, "node.json")); err == nil {
		return nil, fmt.Errorf("a local node is already up in %s: run down first", dir)
	}
	if pids := processesNaming(dir); len(pids) > 0 {
		return nil, fmt.Errorf("node processes of %s still run: %v", dir, pids)
	}
	if err := HostInUse(filepath.Join(dir, "node.json")); err != nil {
		return nil, err
	}
	if runtimeDir != "" {
		// containerd's config names the shim and runc by it, wherever containerd runs.
		if runtimeDir, err = filepath.Abs(runtimeDir); err != nil {
			return nil, err
		}
	}
	n = &Node{Dir: dir, BinDir: binDir, RuntimeDir: runtimeDir, Pids: map[string]int{}}
	for _, tool := range []string{"ip", "/usr/lib/cni/bridge"} {
		if _, err := exec.LookPath(tool); err != nil {
			return nil, fmt.Errorf("%s is missing (hack/install-deps.sh installs it): %w", tool, err)
		}
	}
	for _, tool := range runtimeTools {
		if _, err := exec.LookPath(n.runtimeBin(tool)); err != nil {
			if runtimeDir != "" {
				return nil, fmt.Errorf("%s is missing in the runtime dir (hack/runtime-binaries.sh builds it): %w", tool, err)
			}
			return nil, fmt.Errorf("%s is missing (hack/install-deps.sh installs it): %w", tool, err)
		}
	}
	before, err := snapshotHost()
	if err != nil {
		return nil, err
	}
	hostIP, err := hostAddress()
	if err != nil {
		return nil, err
	}
	n.Before, n.HostIP = before, hostIP
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	if err := n.save(); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			logf("localnode: start failed, tearing down: %v", err)
			if derr := n.Down(logf); derr != nil {
				err = errors.Join(err, derr)
			}
		}
	}()
	start := time.Now()
	if err := writePKI(filepath.Join(dir, "pki"), []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP(hostIP), net.ParseIP("10.0.0.1")}); err != nil {
		return n, err
	}
	if err := n.writeConfig(hostIP); err != nil {
		return n, err
	}
	pki := func(f string) string { return filepath.Join(dir, "pki", f) }
	if err := n.start("etcd", filepath.Join(binDir, "etcd"),
		"--name=local", "--data-dir="+filepath.Join(dir, "etcd"),
		fmt.Sprintf("--listen-client-urls=http://127.0.0.1:%d", etcdClientPort),
		fmt.Sprintf("--advertise-client-urls=http://127.0.0.1:%d", etcdClientPort),
		fmt.Sprintf("--listen-peer-urls=http://127.0.0.1:%d", etcdPeerPort),
		fmt.Sprintf("--initial-advertise-peer-urls=http://127.0.0.1:%d", etcdPeerPort),
		fmt.Sprintf("--initial-cluster=local=http://127.0.0.1:%d", etcdPeerPort),
		"--log-level=warn"); err != nil {
		return n, err
	}
	if err := n.start("kube-apiserver", filepath.Join(binDir, "kube-apiserver"),
		fmt.Sprintf("--etcd-servers=http://127.0.0.1:%d", etcdClientPort),
		"--bind-address=127.0.0.1", fmt.Sprintf("--secure-port=%d", apiserverPort),
		// kube-apiserver refuses a loopback address to advertise; nothing listens there
		// (no kube-proxy): in-cluster clients on the host network use 127.0.0.1.
		"--advertise-address="+hostIP,
		"--service-cluster-ip-range="+serviceRange,
		"--tls-cert-file="+pki("apiserver.crt"), "--tls-private-key-file="+pki("apiserver.key"),
		"--client-ca-file="+pki("ca.crt"), "--token-auth-file="+filepath.Join(dir, "tokens.csv"),
		"--authorization-mode=Node,RBAC", "--enable-admission-plugins=NodeRestriction",
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-account-key-file="+pki("sa.pub"), "--service-account-signing-key-file="+pki("sa.key"),
		"--kubelet-client-certificate="+pki("apiserver-kubelet-client.crt"),
		"--kubelet-client-key="+pki("apiserver-kubelet-client.key"),
		// kubelet by its InternalIP (hostIP, where its API port listens): the node's Hostname
		// address does not resolve, and logs, exec and port-forward would fail on it.
		"--kubelet-preferred-address-types=InternalIP,Hostname",
		"--allow-privileged=true", // the agent's DaemonSet needs hostPID
		"--profiling=false"); err != nil {
		return n, err
	}
	cs, err := n.Client()
	if err != nil {
		return n, err
	}
	if err := waitFor(ctx, 60*time.Second, "the apiserver to be ready", func() error {
		_, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return err
	}); err != nil {
		return n, err
	}
	logf("localnode: apiserver ready after %s", time.Since(start).Round(time.Millisecond))
	if err := n.start("kube-controller-manager", filepath.Join(binDir, "kube-controller-manager"),
		"--kubeconfig="+filepath.Join(dir, "kube-controller-manager.kubeconfig"),
		"--bind-address=127.0.0.1", "--secure-port=10257", "--leader-elect=false",
		"--root-ca-file="+pki("ca.crt"), "--service-account-private-key-file="+pki("sa.key"),
		"--cluster-name=numapref-local", "--profiling=false"); err != nil {
		return n, err
	}
	if err := n.start("kube-scheduler", filepath.Join(binDir, "kube-scheduler"),
		"--kubeconfig="+filepath.Join(dir, "kube-scheduler.kubeconfig"),
		"--bind-address=127.0.0.1", "--secure-port=10259", "--leader-elect=false", "--profiling=false"); err != nil {
		return n, err
	}
	if err := n.startContainerd(ctx); err != nil {
		return n, err
	}
	for _, img := range images {
		if err := n.ImportImage(ctx, img); err != nil {
			return n, err
		}
	}
	if err := n.start("kubelet", filepath.Join(binDir, "kubelet"),
		"--config="+filepath.Join(dir, "kubelet/config.yaml"),
		"--kubeconfig="+filepath.Join(dir, "kubelet.kubeconfig"),
		"--root-dir="+filepath.Join(dir, "kubelet/root"),
		"--hostname-override="+NodeName, "--node-ip="+hostIP); err != nil {
		return n, err
	}
	if err := waitFor(ctx, 120*time.Second, "node "+NodeName+" to be Ready", func() error {
		return NodeReady(ctx, cs, NodeName)
	}); err != nil {
		return n, err
	}
	logf("localnode: node %s Ready after %s", NodeName, time.Since(start).Round(time.Millisecond))
	return n, nil
}

// NodeReady returns nil when the node's Ready condition is True.
func NodeReady(ctx context.Context, cs kubernetes.Interface, name string) error {
	node, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
			return nil
		}
	}
	return fmt.Errorf("node %s not Ready", name)
}

// Load reads the record of a node started earlier.
func Load(dir string) (*Node, error) {
	n := &Node{}
	return n, ReadRecord(filepath.Join(dir, "node.json"), n)
}

// ReclaimOrphan tears down the node recorded in dir when none of its daemons runs any more:
// the run that started it was killed (a CI job cut off, a machine whose processes were
// stopped) and left its record, mounts, cgroups and sysctls behind. A node with a live
// daemon is left alone. It tells whether it tore a node down.
func ReclaimOrphan(dir string, logf func(string, ...any)) (bool, error) {
	n, err := Load(dir)
	if os.IsNotExist(err) || (err == nil && len(processesNaming(dir)) > 0) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("an unreadable local node record (remove %s by hand once nothing runs from it): %w", dir, err)
	}
	logf("localnode: the node recorded in %s has no live daemon (an earlier run was killed): tearing it down", dir)
	if err := n.Down(logf); err != nil {
		return false, fmt.Errorf("tearing down the orphaned node in %s: %w", dir, err)
	}
	return true, nil
}

func (n *Node) save() error { return WriteRecord(filepath.Join(n.Dir, "node.json"), n) }

// ReadRecord reads the JSON record of a cluster (a local node, a kind cluster) into v.
func ReadRecord(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("reading %s: %w", path, err)
	}
	return nil
}

// WriteRecord writes v as the JSON record at path, readable by root only.
func WriteRecord(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o600)
}

// Client returns an admin clientset.
func (n *Node) Client() (*kubernetes.Clientset, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", n.Kubeconfig())
	if err != nil {
		return nil, err
	}
	return kubernetes.NewForConfig(cfg)
}

// ImportImage imports an image tarball into containerd's k8s.io namespace, where kubelet
// finds it (pods use imagePullPolicy: Never).
func (n *Node) ImportImage(ctx context.Context, tarball string) error {
	out, err := exec.CommandContext(ctx, n.runtimeBin("ctr"), "--address", n.ContainerdSocket(), "-n", "k8s.io",
		"images", "import", tarball).CombinedOutput()
	if err != nil {
		return fmt.Errorf("importing %s: %v: %s", tarball, err, out)
	}
	return nil
}

// start runs a daemon in its own session with its output in logs/<name>.log and records
// its pid before anything else can fail.
func (n *Node) start(name, bin string, args ...string) error {
	return n.startEnv(name, bin, nil, args...)
}

// startEnv is start with the environment env (nil: this process's).
func (n *Node) startEnv(name, bin string, env []string, args ...string) error {
	log, err := os.OpenFile(filepath.Join(n.Dir, "logs", name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer log.Close()
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %w", name, err)
	}
	go cmd.Wait() // reaps it when this process outlives it; harmless otherwise
	n.Pids[name] = cmd.Process.Pid
	return n.save()
}

// startContainerd starts containerd and waits until it answers, and serves NRI when it
// should.
func (n *Node) startContainerd(ctx context.Context) error {
	// containerd 2.x's shim and runc are named by path in its config; its PATH starts with
	// the runtime dir all the same, for whatever else it or the shim looks up by name.
	var env []string
	if n.RuntimeDir != "" {
		env = append(os.Environ(), "PATH="+n.RuntimeDir+string(os.PathListSeparator)+os.Getenv("PATH"))
	}
	if err := n.startEnv("containerd", n.runtimeBin("containerd"), env, "--config="+filepath.Join(n.Dir, "containerd/config.toml")); err != nil {
		return err
	}
	if err := waitFor(ctx, 30*time.Second, "containerd", func() error {
		return exec.CommandContext(ctx, n.runtimeBin("ctr"), "--address", n.ContainerdSocket(), "version").Run()
	}); err != nil {
		return err
	}
	if sock := n.NRISocket(); sock != "" {
		return waitFor(ctx, 10*time.Second, "containerd's NRI socket", func() error {
			_, err := os.Stat(sock)
			return err
		})
	}
	return nil
}

// RestartRuntime stops containerd and starts it again, as an upgrade or a crash and its
// restart do: the containers and their shims keep running, and NRI plugins lose their
// connection until the new containerd serves the socket again.
func (n *Node) RestartRuntime(ctx context.Context) error {
	pid, ok := n.Pids["containerd"]
	if !ok {
		return fmt.Errorf("no containerd recorded for the node in %s", n.Dir)
	}
	if err := stopProcess(pid, n.Dir, 20*time.Second); err != nil {
		return err
	}
	return n.startContainerd(ctx)
}

// stopOrder stops kubelet first (so it makes nothing new), the control plane last.
var stopOrder = []string{"kubelet", "containerd", "kube-scheduler", "kube-controller-manager", "kube-apiserver", "etcd"}

// Down stops every process of the node, removes its containers, mounts, network and
// cgroups, puts the host's sysctls and iptables back, and deletes its directory. It
// carries on past errors and returns them all; what it could not undo shows in Leftovers.
func (n *Node) Down(logf func(string, ...any)) error {
	var errs []error
	stop := func(name string) {
		if pid, ok := n.Pids[name]; ok {
			errs = append(errs, stopProcess(pid, n.Dir, 20*time.Second))
		}
	}
	stop("kubelet")
	// Containers: every process in the pods' cgroups, then containerd's shims.
	killPodProcesses()
	for _, pid := range processesNaming(n.Dir) {
		if exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid)); filepath.Base(exe) == "containerd-shim-runc-v2" {
			errs = append(errs, stopProcess(pid, n.Dir, 5*time.Second))
		}
	}
	for _, name := range stopOrder[1:] {
		stop(name)
	}
	// Anything else that still names the directory (a daemon started by an earlier,
	// crashed run of Up whose pid was not recorded).
	for _, pid := range processesNaming(n.Dir) {
		errs = append(errs, stopProcess(pid, n.Dir, 5*time.Second))
	}
	err := PutBack(n.Before, n.Dir, n.prefixes(), errs)
	if err == nil {
		logf("localnode: torn down, nothing left")
	}
	return err
}

// PutBack ends a teardown once the cluster's processes are gone: it puts the host back to
// before (mounts at or below prefixes detached), removes dir, and returns errs with an
// error naming whatever still differs from before.
func PutBack(before *HostState, dir string, prefixes []string, errs []error) error {
	if before == nil {
		return errors.Join(append(errs, os.RemoveAll(dir), errors.New("no snapshot of the host"))...)
	}
	errs = append(errs, before.Restore(prefixes), os.RemoveAll(dir))
	if left := before.Leftovers(dir, prefixes); len(left) > 0 {
		errs = append(errs, fmt.Errorf("left on the host: %s", strings.Join(left, "; ")))
	}
	return errors.Join(errs...)
}

// Leftovers lists what a node left on the host compared with the snapshot taken before it
// started: empty after a complete teardown.
func (n *Node) Leftovers() []string {
	if n.Before == nil {
		return []string{"no snapshot of the host"}
	}
	return n.Before.Leftovers(n.Dir, n.prefixes())
}

// stopProcess stops pid if it still is one of the node's daemons (see StopProcess).
func stopProcess(pid int, dir string, grace time.Duration) error {
	return StopProcess(pid, dir, daemons, grace)
}

// StopProcess sends SIGTERM, then SIGKILL after grace, to pid if it still runs one of the
// programs in daemons with dir on its command line (a recycled pid is left alone), and waits
// until it is gone.
func StopProcess(pid int, dir string, daemons []string, grace time.Duration) error {
	if !isDaemon(pid, dir, daemons) {
		return nil
	}
	syscall.Kill(pid, syscall.SIGTERM)
	syscall.Kill(pid, syscall.SIGCONT) // a paused one (PauseAPIServer) takes SIGTERM only running
	if gone(pid, dir, daemons, grace) {
		return nil
	}
	syscall.Kill(pid, syscall.SIGKILL)
	if gone(pid, dir, daemons, 10*time.Second) {
		return nil
	}
	return fmt.Errorf("process %d survives SIGKILL", pid)
}

func gone(pid int, dir string, daemons []string, within time.Duration) bool {
	return poll.Until(within, func() error {
		if isDaemon(pid, dir, daemons) {
			return errors.New("still running")
		}
		return nil
	}) == nil
}

// isDaemon tells whether pid is alive (not a zombie) and one of the daemons naming dir.
func isDaemon(pid int, dir string, daemons []string) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	if i := strings.LastIndexByte(string(stat), ')'); i > 0 && i+2 < len(stat) && stat[i+2] == 'Z' {
		return false
	}
	for _, p := range ProcessesNaming(dir, daemons) {
		if p == pid {
			return true
		}
	}
	return false
}

// killPodProcesses SIGKILLs every process in a kubepods cgroup (the node's containers; one
// node per machine) until none is left.
func killPodProcesses() {
	hiers, _ := cgroupHierarchies()
	for range 50 {
		found := false
		for _, h := range hiers {
			_ = filepath.WalkDir(filepath.Join(h, "kubepods"), func(p string, d os.DirEntry, err error) error { // no error: the callback skips what it cannot read
				if err != nil || d.IsDir() || d.Name() != "cgroup.procs" {
					return nil
				}
				b, _ := os.ReadFile(p)
				for _, f := range strings.Fields(string(b)) {
					var pid int
					if _, err := fmt.Sscanf(f, "%d", &pid); err == nil {
						syscall.Kill(pid, syscall.SIGKILL)
						found = true
					}
				}
				return nil
			})
		}
		if !found {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// hostAddress is the machine's first non-loopback IPv4 address: kube-apiserver and
// kubelet refuse loopback as the address they advertise.
func hostAddress() (string, error) {
	ifs, err := net.Interfaces()
	if err != nil {
		return "", err
	}
	for _, i := range ifs {
		if i.Flags&net.FlagUp == 0 || i.Flags&net.FlagLoopback != 0 {
			continue
		}
		addrs, _ := i.Addrs()
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil {
				return ipn.IP.String(), nil
			}
		}
	}
	return "", fmt.Errorf("no non-loopback IPv4 address on this machine")
}

func randomToken() (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}

// WaitFor polls f until it succeeds, ctx ends or timeout passes.
func WaitFor(ctx context.Context, timeout time.Duration, what string, f func() error) error {
	return waitFor(ctx, timeout, what, f)
}

func waitFor(ctx context.Context, timeout time.Duration, what string, f func() error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := poll.Context(ctx, 250*time.Millisecond, f); err != nil {
		return fmt.Errorf("waiting %s for %s: %w", timeout, what, err)
	}
	return nil
}

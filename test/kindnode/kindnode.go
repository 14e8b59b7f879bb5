// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

// Package kindnode runs a three-node kind cluster for the e2e suite (E2E_PROVIDER=kind):
// one control plane and two workers, one of which runs kubelet and containerd with the
// cgroupfs driver while the others keep kind's systemd driver, so the agent resolves both
// cgroup layouts on real nodes.
//
// On a machine with a normal Docker engine it is plain kind: the machine's engine and
// kind's published node image. Where no engine runs (the machines this project is developed
// on), it starts Debian's dockerd for the cluster alone (docker.go), and a node image built
// offline (hack/kind/node-image.sh) stands in for the published one, which cannot be pulled;
// that image has no kube-proxy, CoreDNS or kindnetd image, so the cluster runs without
// kube-proxy and CoreDNS, with a bridge CNI configuration per node instead of kindnetd.
//
// Like test/localnode, Up snapshots what the cluster may change on the host and Down puts
// it back and proves nothing stayed: containers, the nodes' volumes, the docker network and
// its links, iptables rules, mounts, cgroups, kubelet's sysctls (kubelet in a privileged
// node writes the host kernel's), the paths Docker writes outside its directories, and the
// dockerd it started. One cluster at a time, and never beside a local node
// (localnode.HostInUse).
package kindnode

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/numapref/numapref/test/localnode"
)

// DefaultDir is where a cluster keeps its files and its record (cluster.json).
var DefaultDir = filepath.Dir(localnode.KindRecord)

// Options say how to bring a cluster up.
type Options struct {
	Name string // cluster name; kind names the nodes <name>-control-plane, <name>-worker, <name>-worker2
	Dir  string // DefaultDir unless set
	Kind string // the kind binary (hack/tools.sh kind)
	// NodeImage is a node image tarball built by hack/kind/node-image.sh; empty uses
	// kind's published node image (a machine that can pull it).
	NodeImage string
	// OwnDocker starts the cluster's own dockerd even where the machine runs an engine.
	OwnDocker bool
}

// Cluster is a running (or half-started) kind cluster. Its record lives in
// <Dir>/cluster.json, so a later run can tear down what a crashed one left.
type Cluster struct {
	Name       string               `json:"name"`
	Dir        string               `json:"dir"`
	Kind       string               `json:"kind"`
	Network    string               `json:"network"`
	Offline    bool                 `json:"offline"`              // the node image of hack/kind/node-image.sh
	DockerHost string               `json:"dockerHost,omitempty"` // the suite's dockerd; empty: the machine's engine
	DockerdPid int                  `json:"dockerdPid,omitempty"`
	Before     *localnode.HostState `json:"before"`
}

// The nodes' roles, in kind's naming order, and which cgroup driver each runs.
var nodeRoles = []struct {
	role, suffix string
	cgroupfs     bool
}{
	{"control-plane", "-control-plane", false},
	{"worker", "-worker", false},
	{"worker", "-worker2", true},
}

// Nodes are the Kubernetes node names: the control plane, the systemd worker, the cgroupfs
// worker.
func (c *Cluster) Nodes() []string {
	var names []string
	for _, r := range nodeRoles {
		names = append(names, c.Name+r.suffix)
	}
	return names
}

// Kubeconfig is the admin kubeconfig kind wrote (the API server through 127.0.0.1).
func (c *Cluster) Kubeconfig() string { return filepath.Join(c.Dir, "kubeconfig") }

func (c *Cluster) record() string { return filepath.Join(c.Dir, "cluster.json") }

// watch is what a cluster may change on the host beyond sysctls, iptables and netns.
// Docker writes /etc/docker/key.json (20.10's trust key), /run/docker (plugins) and
// containerd's shims /run/containerd whatever its directories; kind bind-mounts
// /lib/modules into every node, which Docker creates when the host has none.
func watch(ownDocker bool) localnode.HostWatch {
	w := localnode.HostWatch{Paths: []string{"/lib/modules", "/etc/docker/key.json"}}
	if ownDocker {
		w.Paths = append(w.Paths, "/run/docker", "/run/containerd")
		w.Cgroups = []string{dockerCgroupParent}
		w.LinkPrefixes = []string{"br-", "veth"}
		w.Daemons = dockerDaemons
	}
	return w
}

// Up brings a cluster up and returns it; on any error it tears down what it started.
func Up(ctx context.Context, o Options, logf func(string, ...any)) (*Cluster, error) {
	if o.Dir == "" {
		o.Dir = DefaultDir
	}
	if old, err := Load(o.Dir); err == nil {
		logf("kindnode: a cluster from an earlier run is recorded in %s: tearing it down first", o.Dir)
		if err := old.Down(ctx, logf); err != nil {
			return nil, fmt.Errorf("tearing down the earlier cluster: %w", err)
		}
	}
	if _, err := localnode.ReclaimOrphan(localnode.DefaultDir, logf); err != nil {
		return nil, err
	}
	if err := localnode.HostInUse(filepath.Join(o.Dir, "cluster.json")); err != nil {
		return nil, err
	}
	c := &Cluster{Name: o.Name, Dir: o.Dir, Kind: o.Kind, Network: o.Name, Offline: o.NodeImage != ""}
	ownDocker := o.OwnDocker || !machineDockerAnswers(ctx)
	var err error
	if c.Before, err = localnode.SnapshotHost(watch(ownDocker)); err != nil {
		return nil, err
	}
	if err := c.prepareDir(); err != nil {
		return nil, err
	}
	if err := c.start(ctx, ownDocker, o.NodeImage, logf); err != nil {
		logf("kindnode: start failed, tearing down: %v", err)
		return nil, errors.Join(err, c.Down(context.WithoutCancel(ctx), logf))
	}
	return c, nil
}

// start starts the cluster's dockerd when it has its own, imports the offline node image
// if there is one, and creates the cluster.
func (c *Cluster) start(ctx context.Context, ownDocker bool, nodeImage string, logf func(string, ...any)) error {
	start := time.Now()
	if ownDocker {
		if err := c.startDockerd(ctx, logf); err != nil {
			return err
		}
		logf("kindnode: dockerd up in %s", time.Since(start).Round(time.Millisecond))
	}
	image := ""
	if c.Offline {
		var err error
		if image, err = c.importNodeImage(ctx, nodeImage, logf); err != nil {
			return err
		}
	}
	cfg, err := c.writeConfig(ctx, image)
	if err != nil {
		return err
	}
	createStart := time.Now()
	if _, err := c.kind(ctx, "create", "cluster", "--name", c.Name, "--config", cfg, "--kubeconfig", c.Kubeconfig(), "--retain"); err != nil {
		return err
	}
	if err := c.waitNodesReady(ctx); err != nil {
		return err
	}
	logf("kindnode: %d nodes Ready %s after kind create cluster started (%s since Up)", len(nodeRoles),
		time.Since(createStart).Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
	return nil
}

// prepareDir makes the cluster's directory with its record and bin/docker, the docker
// client kind finds first on its PATH (env).
func (c *Cluster) prepareDir() error {
	bin := filepath.Join(c.Dir, "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		return err
	}
	if cli := dockerCLI(); cli != "docker" {
		if err := os.Symlink(cli, filepath.Join(bin, "docker")); err != nil {
			return err
		}
	}
	return c.save()
}

// importNodeImage loads the offline node image into the engine with the settings of kind's
// node image (the Dockerfile's ENV and ENTRYPOINT; `docker import` cannot set STOPSIGNAL,
// which only `docker stop` would use: kind removes nodes with `docker rm -f`).
func (c *Cluster) importNodeImage(ctx context.Context, tarball string, logf func(string, ...any)) (string, error) {
	// The build's cache key names the image, so a rebuilt image gets a new reference.
	ref := "numapref.local/kind-node:" + filepath.Base(filepath.Dir(tarball))
	if _, err := c.docker(ctx, "image", "inspect", ref); err == nil {
		return ref, nil
	}
	start := time.Now()
	if _, err := c.docker(ctx, "import",
		"--change", "ENV container=docker",
		"--change", `ENTRYPOINT ["/usr/local/bin/entrypoint", "/sbin/init"]`,
		tarball, ref); err != nil {
		return "", err
	}
	logf("kindnode: imported the node image %s in %s", ref, time.Since(start).Round(time.Millisecond))
	return ref, nil
}

// kind runs the kind CLI against the cluster's engine.
func (c *Cluster) kind(ctx context.Context, args ...string) (string, error) { //nolint:unparam // a command runner returns its output; today's callers only act
	cmd := exec.CommandContext(ctx, c.Kind, args...)
	cmd.Env = c.env()
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("kind %s: %w: %s", strings.Join(args, " "), err, tail(string(out), 60))
	}
	return string(out), nil
}

func tail(s string, lines int) string {
	l := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(l) > lines {
		l = l[len(l)-lines:]
	}
	return strings.Join(l, "\n")
}

// LoadImages puts image tarballs (`docker save` format) on every node (kind load
// image-archive: ctr import into the nodes' containerd).
func (c *Cluster) LoadImages(ctx context.Context, tarballs []string) error {
	for _, t := range tarballs {
		if _, err := c.kind(ctx, "load", "image-archive", t, "--name", c.Name); err != nil {
			return err
		}
	}
	return nil
}

// BuildImage builds numapref's image as an operator does, `make image` (hack/image.sh: the
// Dockerfile, on this cluster's engine), tagged ref, and saves it to archive for
// LoadImages. The suite's own dockerd pulls nothing, so there the base is scratch: the
// binary is static and reads no file of distroless's. An image built on the machine's own
// engine is removed from it once saved.
func (c *Cluster) BuildImage(ctx context.Context, repo, ref, archive string) error {
	cmd := exec.CommandContext(ctx, filepath.Join(repo, "hack/image.sh"), "--archive", archive)
	cmd.Dir = repo
	cmd.Env = append(c.env(), "IMG="+ref, "ENGINE="+dockerCLI())
	if c.DockerHost != "" {
		cmd.Env = append(cmd.Env, "BASE=scratch")
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("make image %s: %w: %s", ref, err, tail(string(out), 20))
	}
	if c.DockerHost == "" {
		if _, err := c.docker(ctx, "rmi", ref); err != nil {
			return err
		}
	}
	return nil
}

// Exec runs a POSIX shell script on a node (in the node container, whose pid namespace its
// pods with hostPID share).
func (c *Cluster) Exec(ctx context.Context, node, script string) (string, error) {
	cmd := exec.CommandContext(ctx, dockerCLI(), "exec", node, "sh", "-c", script)
	cmd.Env = c.env()
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// NodeIP is a node's address on the cluster's docker network, which the host reaches.
func (c *Cluster) NodeIP(ctx context.Context, node string) (string, error) {
	out, err := c.docker(ctx, "inspect", "-f", "{{range .NetworkSettings.Networks}}{{.IPAddress}} {{end}}", node)
	if err != nil {
		return "", err
	}
	f := strings.Fields(out)
	if len(f) == 0 {
		return "", fmt.Errorf("node %s has no address", node)
	}
	return f[0], nil
}

func (c *Cluster) waitNodesReady(ctx context.Context) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig())
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	return localnode.WaitFor(ctx, 3*time.Minute, "every node to be Ready", func() error {
		for _, name := range c.Nodes() {
			if err := localnode.NodeReady(ctx, cs, name); err != nil {
				return err
			}
		}
		return nil
	})
}

// Load reads the record of a cluster started earlier.
func Load(dir string) (*Cluster, error) {
	c := &Cluster{}
	return c, localnode.ReadRecord(filepath.Join(dir, "cluster.json"), c)
}

// ReclaimOrphan tears down the cluster recorded in dir when it ran on a dockerd of its own
// and none of that dockerd's processes runs any more: the run that started it was killed
// and left its record, mounts and sysctls behind, which would keep a local node from
// starting (localnode.HostInUse). A cluster on the machine's Docker engine, or one with a
// live daemon, is left alone. It tells whether it tore a cluster down.
func ReclaimOrphan(ctx context.Context, dir string, logf func(string, ...any)) (bool, error) {
	c, err := Load(dir)
	if os.IsNotExist(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("an unreadable kind cluster record (remove %s by hand once nothing runs from it): %w", dir, err)
	}
	if c.DockerHost == "" || len(localnode.ProcessesNaming(c.Dir, dockerDaemons)) > 0 {
		return false, nil
	}
	logf("kindnode: the cluster recorded in %s has no live daemon (an earlier run was killed): tearing it down", dir)
	if err := c.Down(ctx, logf); err != nil {
		return false, fmt.Errorf("tearing down the orphaned kind cluster in %s: %w", dir, err)
	}
	return true, nil
}

func (c *Cluster) save() error { return localnode.WriteRecord(c.record(), c) }

// Down deletes the cluster (its node containers and their volumes) and its docker network,
// stops the dockerd it started, puts the host back and deletes the directory. It carries on
// past errors and returns them all, with whatever Leftovers still finds.
func (c *Cluster) Down(ctx context.Context, logf func(string, ...any)) error {
	var errs []error
	engine := c.DockerHost == "" || c.dockerdAlive()
	if engine {
		// kind removes the node containers with their anonymous volumes (docker rm -f -v).
		if _, err := c.kind(ctx, "delete", "cluster", "--name", c.Name, "--kubeconfig", c.Kubeconfig()); err != nil {
			errs = append(errs, err)
		}
		if out, err := c.docker(ctx, "network", "rm", c.Network); err != nil && !strings.Contains(out, "No such network") && !strings.Contains(out, "not found") {
			errs = append(errs, err)
		}
	}
	if c.DockerHost != "" {
		errs = append(errs, c.stopDockerd())
	}
	if err := localnode.HostInUse(c.record()); err != nil {
		// Another cluster came up meanwhile (one whose code does not check for this
		// one): putting the host back to the snapshot would undo its kubelet's sysctls and
		// remove its /run/containerd. Leave the host alone and say so.
		return errors.Join(append(errs, fmt.Errorf("not putting the host back to its state before the kind cluster: %w", err))...)
	}
	err := localnode.PutBack(c.Before, c.Dir, []string{c.Dir}, errs)
	if err == nil {
		logf("kindnode: torn down, nothing left")
	}
	return err
}

// Leftovers lists what the cluster left on the host compared with the snapshot taken
// before it started: empty after a complete teardown.
func (c *Cluster) Leftovers() []string {
	if c.Before == nil {
		return []string{"no snapshot of the host"}
	}
	return c.Before.Leftovers(c.Dir, []string{c.Dir})
}

func (c *Cluster) dockerdAlive() bool {
	return c.DockerdPid > 0 && len(localnode.ProcessesNaming(c.Dir, []string{"dockerd"})) > 0
}

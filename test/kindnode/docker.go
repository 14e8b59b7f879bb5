// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package kindnode

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/numapref/numapref/test/localnode"
)

// The cgroup under every hierarchy's root that the suite's dockerd puts its containers in
// (--cgroup-parent): the kind nodes and, below them, everything their kubelets start. A name
// of its own, so teardown knows what to remove and nothing else is touched.
const dockerCgroupParent = "numapref-kind"

// runtimeName is the OCI runtime dockerd registers for the wrapper (runtime-wrapper).
const runtimeName = "numapref-runc"

// dockerDaemons are the programs the suite's dockerd runs on the host; their command lines
// name the cluster's directory (the daemon's flags, its containerd's config and the shims'
// -address).
var dockerDaemons = []string{"dockerd", "containerd", "containerd-shim-runc-v2", "docker-proxy"}

func (c *Cluster) dockerDir() string { return filepath.Join(c.Dir, "docker") }

// dockerSocket is the suite's dockerd's API socket.
func (c *Cluster) dockerSocket() string { return filepath.Join(c.dockerDir(), "docker.sock") }

// machineDockerAnswers tells whether this machine runs a Docker engine of its own that the
// docker CLI reaches (DOCKER_HOST or the default socket).
func machineDockerAnswers(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return exec.CommandContext(ctx, dockerCLI(), "info", "--format", "{{.ServerVersion}}").Run() == nil
}

// dockerCLI is Debian's docker client when installed (the version of the dockerd the suite
// starts), else whatever docker is on PATH.
func dockerCLI() string {
	if _, err := os.Stat("/usr/bin/docker"); err == nil {
		return "/usr/bin/docker"
	}
	return "docker"
}

// startDockerd starts Debian's dockerd (docker.io 20.10) for this cluster alone, with
// every file under the cluster's directory and nothing on the host's network setup:
//
//   - --data-root, --exec-root, -H unix://…, --pidfile and an empty --config-file: its own
//     files, socket and settings, whatever /etc/docker says;
//   - --iptables=false --ip-masq=false --ip-forward=false --bridge=none: no iptables rules,
//     no docker0, no change to net.ipv4.ip_forward. kind's own network ("kind", here a
//     network of the cluster's name) still works: a user-defined bridge gives the nodes
//     addresses on one link, which the host reaches directly, and the embedded DNS server
//     (set up inside each container's network namespace) resolves the node names kubeadm
//     joins by. The API server's port on 127.0.0.1 goes through docker-proxy;
//   - --cgroup-parent: its containers' cgroups under one name of ours (dockerCgroupParent);
//   - the runtime wrapper, only where the host needs it (see needsRuntimeWrapper).
func (c *Cluster) startDockerd(ctx context.Context, logf func(string, ...any)) error {
	d := c.dockerDir()
	for _, sub := range []string{"data", "exec"} {
		if err := os.MkdirAll(filepath.Join(d, sub), 0o700); err != nil {
			return err
		}
	}
	if err := os.WriteFile(filepath.Join(d, "daemon.json"), []byte("{}\n"), 0o600); err != nil {
		return err
	}
	args := []string{
		"--data-root=" + filepath.Join(d, "data"), "--exec-root=" + filepath.Join(d, "exec"),
		"-H", "unix://" + c.dockerSocket(), "--pidfile=" + filepath.Join(d, "docker.pid"),
		"--config-file=" + filepath.Join(d, "daemon.json"),
		"--iptables=false", "--ip-masq=false", "--ip-forward=false", "--bridge=none",
		"--cgroup-parent=/" + dockerCgroupParent,
	}
	wrapper, missing, err := c.runtimeWrapper(ctx)
	if err != nil {
		return err
	}
	if wrapper != "" {
		// Docker 20.10 asks runc for every capability it knows for a --privileged
		// container, and kind's nodes are privileged; runc fails on one the bounding set
		// lacks ("unable to apply caps: operation not permitted"). The wrapper drops them.
		logf("kindnode: this host's capability bounding set lacks %s: dockerd runs containers through %s", strings.Join(missing, ", "), wrapper)
		args = append(args, "--add-runtime", runtimeName+"="+wrapper, "--default-runtime", runtimeName)
	}
	log, err := os.OpenFile(filepath.Join(d, "dockerd.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer log.Close()
	cmd := exec.Command("dockerd", args...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting dockerd (hack/install-deps.sh kind installs it): %w", err)
	}
	go cmd.Wait() // reap it when it stops
	c.DockerdPid = cmd.Process.Pid
	c.DockerHost = "unix://" + c.dockerSocket()
	if err := c.save(); err != nil {
		return err
	}
	return localnode.WaitFor(ctx, 60*time.Second, "dockerd to answer", func() error {
		_, err := c.docker(ctx, "version", "--format", "{{.Server.Version}}")
		return err
	})
}

// runtimeWrapper builds the runtime wrapper and asks it which capabilities this host's
// bounding set lacks; it returns the wrapper's path only when some are missing.
func (c *Cluster) runtimeWrapper(ctx context.Context) (path string, missing []string, err error) {
	path = filepath.Join(c.dockerDir(), "runtime-wrapper")
	build := exec.CommandContext(ctx, "go", "build", "-o", path, "github.com/numapref/numapref/test/kindnode/runtime-wrapper")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		return "", nil, fmt.Errorf("building the runtime wrapper: %v: %s", err, out)
	}
	out, err := exec.CommandContext(ctx, path, "--missing-caps").Output()
	if err != nil {
		return "", nil, fmt.Errorf("reading the capability bounding set: %w", err)
	}
	missing = strings.Fields(string(out))
	if len(missing) == 0 {
		return "", nil, nil
	}
	return path, missing, nil
}

// stopDockerd stops the suite's dockerd (it stops its containerd), then whatever of its
// programs still names the directory, and detaches the overlay mounts it leaves under its
// data root.
func (c *Cluster) stopDockerd() error {
	var errs []error
	if c.DockerdPid > 0 {
		errs = append(errs, localnode.StopProcess(c.DockerdPid, c.Dir, dockerDaemons, 30*time.Second))
	}
	for _, pid := range localnode.ProcessesNaming(c.Dir, dockerDaemons) {
		errs = append(errs, localnode.StopProcess(pid, c.Dir, dockerDaemons, 10*time.Second))
	}
	return errors.Join(errs...)
}

// docker runs the docker CLI against the cluster's engine and returns its standard output
// (its warnings go to standard error, and into the error).
func (c *Cluster) docker(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, dockerCLI(), args...)
	cmd.Env = c.env()
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out) + stderr.String(), fmt.Errorf("docker %s: %w: %s", strings.Join(args, " "), err, stderr.String())
	}
	return string(out), nil
}

// env is the environment docker and kind run with: the cluster's engine, and kind's
// network of the cluster's own name (so teardown removes only what this cluster made).
func (c *Cluster) env() []string {
	env := append(os.Environ(), "KIND_EXPERIMENTAL_DOCKER_NETWORK="+c.Network)
	if c.DockerHost != "" {
		env = append(env, "DOCKER_HOST="+c.DockerHost)
	}
	// kind runs `docker` from PATH: the client that matches the suite's dockerd first.
	if dockerCLI() == "/usr/bin/docker" {
		for i, e := range env {
			if v, ok := strings.CutPrefix(e, "PATH="); ok {
				env[i] = "PATH=" + filepath.Join(c.Dir, "bin") + ":" + v
			}
		}
	}
	return env
}

// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/numapref/numapref/internal/numa"
	"github.com/numapref/numapref/internal/sandbox"
)

// sandboxAgent confines the agent (installSandbox) and logs what it put in place.
func sandboxAgent(f *agentFlags) error {
	_, err := installSandbox(f)
	return err
}

// installSandbox confines the agent (internal/sandbox) once everything that needs a
// refused call is open: the emulated kernel mounts its private tracefs and probes other
// processes when it starts, and keeps kcmp, which it calls for each new process. The
// seccomp filter always; a Landlock ruleset where the kernel offers Landlock and the agent
// needs no ptrace access to other processes (agentLandlock). Neither can be removed: a
// failure stops the agent, unless -seccomp=false, which installs neither. The status says
// what is in place, for the log and the node's report.
func installSandbox(f *agentFlags) (sandbox.Status, error) {
	log := ctrl.Log.WithName("agent")
	if !f.seccomp {
		log.Info("Sandbox not installed (-seccomp=false): nothing but the pod's own profile refuses ptrace, signals to other processes, execve or writes to the host's files")
		return sandbox.Status{Landlock: sandbox.LandlockStatus{ABI: sandbox.LandlockABI(), Reason: "-seccomp=false"}}, nil
	}
	ruleset, why := agentLandlock(f)
	st, err := sandbox.Install(sandbox.Options{AllowKcmp: f.kernel == "emulated", AllowUnixSockets: f.nriSocket != "" || f.podResourcesSocket != "",
		AllowMovePages: f.migrationRate > 0, Landlock: ruleset})
	if ruleset == nil {
		st.Landlock.Reason = why
	}
	if err != nil {
		return st, fmt.Errorf("agent: %w (-seccomp=false starts without the sandbox)", err)
	}
	log.Info("Seccomp filter installed: these calls now fail with EPERM", "arch", st.Seccomp.Arch, "pid", st.Seccomp.PID,
		"denied", st.Seccomp.Denied, "restricted", st.Seccomp.Restricted, "instructions", st.Seccomp.Instructions, "checkedFromInside", st.Seccomp.Checked)
	if !st.Landlock.Applied {
		log.Info("Landlock ruleset "+st.Landlock.String()+": the agent's files and ports are confined only by the pod", "landlockABI", st.Landlock.ABI)
		return st, nil
	}
	log.Info("Landlock ruleset "+st.Landlock.String(), "readOnly", ruleset.ReadOnly, "readWrite", ruleset.ReadWrite,
		"unixSockets", ruleset.UnixSockets, "bindTCP", ruleset.BindTCP, "connectTCP", ruleset.ConnectTCP, "missing", st.Landlock.Missing,
		"checkedFromInside", st.Landlock.Checked)
	if why != "" {
		log.Info("TCP is not confined by the Landlock ruleset", "why", why)
	}
	return st, nil
}

// agentLandlock is the agent's Landlock ruleset: what it reads (/proc, /sys, the cgroup
// root, its serving certificate, its API credentials, the resolver's files), writes (its
// state dir; the dir's parent only to remove the dir after a drain), connects to (the NRI
// socket's directory; the API server's port) and binds (its metrics and health ports).
//
// A Landlock domain refuses ptrace access to every process outside it, whatever the
// capabilities, and ptrace access is what the preferred-node prctl checks on each task it
// reads or sets, what kcmp checks (the emulated kernel), and what /proc/<pid>/mem and
// /proc/<pid>/root need, and /proc/<pid>/numa_maps, where the agent reads the memory
// policy each container was created with. So only an agent that sets and reads nothing of
// other processes is confined by it: one on a kernel without the patch (-kernel=auto) and
// without NRI. Otherwise the ruleset is nil and why says so; with a ruleset, why says what
// is not confined, if anything.
func agentLandlock(f *agentFlags) (ruleset *sandbox.Landlock, why string) {
	switch {
	case f.kernel == "emulated":
		return nil, "the emulated kernel compares processes with kcmp, a ptrace access check, which a Landlock domain refuses outside itself"
	case f.kernel == "prctl" || kernelHasThePatch("/proc"):
		return nil, "the preferred-node prctl checks ptrace access to each task it reads or sets, which a Landlock domain refuses outside itself"
	case f.nriSocket != "":
		return nil, "the memory policy a container was created with is read from its /proc/<pid>/numa_maps, a ptrace access check, which a Landlock domain refuses outside itself"
	case f.migrationRate > 0:
		return nil, "page migration (move_pages) checks ptrace access to each process whose pages it moves, which a Landlock domain refuses outside itself"
	}
	procRoot, sysRoot := filepath.Join(f.hostRoot, "proc"), filepath.Join(f.hostRoot, "sys")
	cgroupRoot := f.cgroupRoot
	if cgroupRoot == "" {
		cgroupRoot = filepath.Join(sysRoot, "fs", "cgroup")
	}
	l := &sandbox.Landlock{
		// /proc and /sys themselves too: the prctl backend proves support from
		// /proc/self/sched, and the Go runtime reads its cgroup's CPU limit.
		ReadOnly:   uniquePaths(procRoot, "/proc", sysRoot, "/sys", cgroupRoot, f.tlsCertDir, "/etc/resolv.conf", "/etc/hosts", "/etc/nsswitch.conf"),
		ReadWrite:  []string{f.stateDir},
		RemoveDirs: []string{filepath.Dir(f.stateDir)},
	}
	if f.podResourcesSocket != "" {
		// FollowDevices reads the kubelet's PodResources socket, which the kubelet makes
		// anew when it restarts: its directory.
		l.UnixSockets = []string{filepath.Dir(f.podResourcesSocket)}
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", f.kubeconfig)
	if err != nil {
		return l, fmt.Sprintf("tcp: the API server's address is unknown: %v", err)
	}
	l.ReadOnly = uniquePaths(append(l.ReadOnly, credentialDirs(cfg)...)...)
	if cfg.CAFile == "" && len(cfg.CAData) == 0 && !cfg.Insecure {
		// The API server is verified against the system's roots, which crypto/x509 reads
		// once, when first needed: now, while it still may. Without any, verification
		// fails confined or not.
		_, _ = x509.SystemCertPool()
	}
	connect, err := apiPorts(cfg)
	if err != nil {
		return l, "tcp: " + err.Error()
	}
	bind, err := bindPorts(f.metricsAddr, f.probeAddr)
	if err != nil {
		return l, "tcp: " + err.Error()
	}
	l.TCP, l.BindTCP, l.ConnectTCP = true, bind, connect
	return l, ""
}

// bindPorts are the ports of the agent's listeners ("0" or "": none).
func bindPorts(addrs ...string) ([]uint16, error) {
	var ports []uint16
	for _, addr := range addrs {
		if addr == "0" || addr == "" {
			continue
		}
		port, err := portOf(addr)
		if err != nil {
			return nil, fmt.Errorf("the bind address %q: %w", addr, err)
		}
		ports = append(ports, port)
	}
	return ports, nil
}

// kernelHasThePatch reports whether procRoot/self/sched shows the patch's line, which is
// what the prctl backend needs to be used at all (numa.NewPrctl). An unreadable file
// counts as no patch: the backend then issues no prctl either.
func kernelHasThePatch(procRoot string) bool {
	data, err := os.ReadFile(filepath.Join(procRoot, "self", "sched"))
	if err != nil {
		return false
	}
	s, err := numa.ParseSchedNUMA(string(data))
	return err == nil && s.ForcePresent
}

// credentialDirs are the directories of the files the API client reads again while it
// runs: its token (kubelet replaces a projected token in place, through a symbolic link
// in the same directory) and its certificates.
func credentialDirs(cfg *rest.Config) []string {
	var dirs []string
	for _, file := range []string{cfg.BearerTokenFile, cfg.CAFile, cfg.CertFile, cfg.KeyFile} {
		if file != "" {
			dirs = append(dirs, filepath.Dir(file))
		}
	}
	return dirs
}

// apiPorts are the TCP ports the API client dials: the API server's, or its proxy's, and
// 53 when the server is named (the resolver falls back to TCP for a long answer).
func apiPorts(cfg *rest.Config) ([]uint16, error) {
	u, err := url.Parse(cfg.Host)
	if err != nil || u.Host == "" {
		u, err = url.Parse("https://" + cfg.Host)
	}
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("the API server's address %q: %v", cfg.Host, err)
	}
	var ports []uint16
	proxy := cfg.Proxy
	if proxy == nil {
		proxy = http.ProxyFromEnvironment
	}
	target := u
	if p, err := proxy(&http.Request{URL: u}); err != nil {
		return nil, fmt.Errorf("the proxy for %s: %w", u, err)
	} else if p != nil {
		target = p
	}
	port, err := urlPort(target)
	if err != nil {
		return nil, err
	}
	ports = append(ports, port)
	if net.ParseIP(target.Hostname()) == nil {
		ports = append(ports, 53)
	}
	return ports, nil
}

func urlPort(u *url.URL) (uint16, error) {
	switch p := u.Port(); {
	case p != "":
		n, err := strconv.ParseUint(p, 10, 16)
		if err != nil {
			return 0, fmt.Errorf("the port of %s: %w", u.Redacted(), err)
		}
		return uint16(n), nil
	case u.Scheme == "http":
		return 80, nil
	case u.Scheme == "https" || u.Scheme == "":
		return 443, nil
	default:
		return 0, fmt.Errorf("no port in %s", u.Redacted())
	}
}

// portOf is the port of a bind address (host:port, [ip6]:port or :port).
func portOf(addr string) (uint16, error) {
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		return 0, err
	}
	n, err := strconv.ParseUint(p, 10, 16)
	if err != nil {
		return 0, errors.New("not a port number")
	}
	if n == 0 {
		return 0, errors.New("port 0 (any free port) cannot be named in a ruleset")
	}
	return uint16(n), nil
}

// uniquePaths are paths, cleaned, without the empty ones and repeats, in order.
func uniquePaths(paths ...string) []string {
	var out []string
	for _, p := range paths {
		if p == "" {
			continue
		}
		if p = filepath.Clean(p); !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out
}

// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"runtime/debug"
	"strings"
	"time"

	"github.com/numapref/numapref/controllers/agent"
	"github.com/numapref/numapref/controllers/agentcert"
	"github.com/numapref/numapref/internal/nodeagent"
	"github.com/numapref/numapref/internal/nodeagent/devices"
	"github.com/numapref/numapref/internal/nodeagent/devices/podresources"
	"github.com/numapref/numapref/internal/nodeagent/nri"
	"github.com/numapref/numapref/internal/numa/prctl"
	"github.com/numapref/numapref/internal/serving"
)

// The agent's command line: its flags, their checks, and the runtime settings they imply.

type agentFlags struct {
	kubeconfig        string
	summarize         bool // also run the summarizer in this process
	summary           summaryFlags
	nodeName          string
	hostRoot          string
	kernel            string
	prctlOption       int
	stateDir          string
	adoptStateFrom    string
	podName           string
	podNamespace      string
	emulatorStateDir  string
	rescanInterval    time.Duration
	maxTasks          int
	forkEvents        bool
	nriSocket         string
	nriStartGrace     time.Duration
	nriRequired       bool
	migrationRate     float64
	migrationMaxBusy  float64
	cgroupVersion     int
	cgroupDriver      string
	cgroupRoot        string
	kubeletCgroupRoot string
	metricsAddr       string
	secureMetrics     bool
	tlsCertDir        string
	nodeCertificate   bool
	nodeCertLifetime  time.Duration
	metricsAgentOnly  bool
	probeAddr         string
	reportInterval    time.Duration
	restrictionCheck  time.Duration
	seccomp           bool
	profile           string
	// FollowDevices: the kubelet's PodResources socket, the bound of each read, and the
	// DRA device attributes that name a NUMA node.
	podResourcesSocket  string
	podResourcesTimeout time.Duration
	draNUMAAttributes   []string
	// numaTopologyRoot emulates a host of other NUMA nodes (emulatedtopology.go).
	numaTopologyRoot string
	// preferenceCap bounds the cache's NumaPreferences of each namespace
	// (-max-preferences-per-namespace), shared by the cache and the controller.
	preferenceCap *agent.PreferenceCap
}

func (f *agentFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.kubeconfig, "kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig file; empty means in-cluster")
	fs.StringVar(&f.nodeName, "node-name", os.Getenv("NODE_NAME"), "this node's name (downward API: NODE_NAME)")
	fs.StringVar(&f.hostRoot, "host-root", "/", "where the host's /proc and /sys are mounted")
	fs.StringVar(&f.kernel, "kernel", "auto", "kernel backend: auto (prctl when the kernel proves support, else nothing), prctl (fail without support), emulated")
	fs.IntVar(&f.prctlOption, "prctl-option", prctl.DefaultOption, "the PR_PREFERRED_NID option number of the patch this fleet runs (v1/v2: 78, v3: 79; mainline took both: 78 is PR_FUTEX_HASH since 6.16, 79 PR_RSEQ_SLICE_EXTENSION since 7.0, so it is only called on a kernel that proves the patch)")
	fs.StringVar(&f.adoptStateFrom, "adopt-state-from", "", "a state dir an earlier version used (the chart's /var/lib/numapref before state dirs were per release): its state files move into -state-dir when that has no ledger yet, so what the earlier agent set is still undone (refused while an agent still runs on it)")
	fs.StringVar(&f.stateDir, "state-dir", "/var/lib/numapref", "host directory for the agent's state, kept across restarts: ledger.json and ledger.json.journal (what it set), choices.json (placement choices), desired.json (the last desired state), with -nri-socket preferences.json (the NumaPreferences last seen)")
	fs.StringVar(&f.podName, "pod-name", os.Getenv("POD_NAME"), "this agent's pod (downward API: POD_NAME); its DaemonSet owner is watched, and its deletion undoes everything (empty: never)")
	fs.StringVar(&f.podNamespace, "pod-namespace", os.Getenv("POD_NAMESPACE"), "this agent's pod's namespace (downward API: POD_NAMESPACE)")
	fs.StringVar(&f.emulatorStateDir, "emulator-state-dir", "/run/numapref/emulator", "state of the emulated kernel; tmpfs, like the kernel's state it is lost at reboot")
	fs.DurationVar(&f.rescanInterval, "rescan-interval", 10*time.Second, "how often every selected container is checked again")
	fs.IntVar(&f.maxTasks, "max-tasks-per-container", nodeagent.DefaultMaxTasksPerContainer, "one container's share of what the agent keeps per task for the node (ledger entries, pidfds): a container with more tasks is not placed (reason TooManyTasks), the others are; at most what the ledger holds (about 300,000)")
	fs.BoolVar(&f.forkEvents, "fork-events", true, "react to fork events from the proc connector (needs CAP_NET_ADMIN and the host network)")
	fs.StringVar(&f.nriSocket, "nri-socket", "", "the container runtime's NRI socket (containerd >= 1.7, CRI-O >= 1.26; usually "+nri.DefaultSocket+"): "+
		"the agent registers as an NRI plugin and places each selected container as the runtime starts it, before its program runs; empty: off, containers are placed once the API reports them running")
	fs.BoolVar(&f.nriRequired, "nri-required", false, "with -nri-socket, the agent is not ready while it is not registered with the runtime's NRI "+
		"(without it a node whose runtime serves no NRI only says so in its report)")
	fs.DurationVar(&f.nriStartGrace, "nri-start-grace", nodeagent.DefaultStartGrace, "how long a container placed at its start keeps its placement while the API does not report it running, "+
		"counted while the API answers (a slow kubelet posts the status of a burst of new containers late); then only the API's desired state counts")
	fs.Float64Var(&f.migrationRate, "page-migration-rate", 0, "pages per second the agent may move to their container's home, for the NumaPreferences "+
		"that ask for it (spec.pageMigration; move_pages(2), which the seccomp filter allows only when this is above 0); 0: this node moves no pages")
	fs.Float64Var(&f.migrationMaxBusy, "page-migration-max-busy", 0.25, "the share of one CPU's time the agent may spend in the kernel's page copies, in (0, 1]")
	fs.IntVar(&f.cgroupVersion, "cgroup-version", 0, "cgroup version (1 or 2); 0 probes")
	fs.StringVar(&f.cgroupDriver, "cgroup-driver", "", `cgroup driver ("systemd" or "cgroupfs"); empty probes`)
	fs.StringVar(&f.cgroupRoot, "cgroup-root", "", "where the cgroup filesystems are mounted (default <host-root>/sys/fs/cgroup)")
	fs.StringVar(&f.kubeletCgroupRoot, "kubelet-cgroup-root", "/", `kubelet's cgroupRoot setting ("/kubelet" on kind)`)
	fs.StringVar(&f.metricsAddr, "metrics-bind-address", defaultMetricsAddr(os.Getenv("HOST_IP")), `metrics endpoint address; "0" disables it; default: the node's IP (HOST_IP, downward API status.hostIP) port 8443, or every address without HOST_IP`)
	fs.BoolVar(&f.secureMetrics, "metrics-secure", true, "serve metrics (and inspect) over HTTPS with authentication and authorization; false: metrics over plain HTTP to anyone, no inspect")
	fs.StringVar(&f.tlsCertDir, "tls-cert-dir", "", "directory with the metrics port's serving certificate, tls.crt and tls.key (a kubernetes.io/tls Secret volume), re-read when they change; "+
		"empty: a self-signed certificate made at start, which no client can verify")
	fs.BoolVar(&f.nodeCertificate, "tls-node-certificate", false, "serve this node's own certificate, asked for through the CSR API (signer "+agentcert.AgentServingSigner+
		", which the summarizer signs only for the agent bound to the node the certificate names) and renewed at two thirds of its life; exclusive with -tls-cert-dir")
	fs.DurationVar(&f.nodeCertLifetime, "tls-node-certificate-lifetime", 7*24*time.Hour, "the validity -tls-node-certificate asks for (the signer may give less)")
	fs.BoolVar(&f.metricsAgentOnly, "metrics-require-agent-audience", false, "/metrics accepts only tokens bound to the audience "+serving.AgentAudience+
		" (inspect always does); by default it also accepts the API server's own audience, which a Prometheus pod's service account token carries")
	fs.StringVar(&f.probeAddr, "health-probe-bind-address", ":8081", "health probe address")
	fs.BoolVar(&f.summarize, "leader-elect", false, "also run the summarizer in this process, elected among the agents that run it (needs the summarizer's rights, which the chart gives only to the summarizer Deployment: for single-binary setups such as the kernel lab)")
	f.summary.register(fs)
	fs.DurationVar(&f.reportInterval, "report-interval", 5*time.Second, "least time between two writes of this node's NumaNodeReport")
	fs.DurationVar(&f.restrictionCheck, "node-restriction-check-interval", 10*time.Minute, "how often the agent proves, with two dry-run writes, that the node restriction policy refuses its writes outside its own node (at start, then this often); "+
		"if the API accepts them it reports NodeRestrictionMissing (SECURITY.md); 0 never checks")
	f.registerDevices(fs)
	fs.StringVar(&f.profile, "profile", "", "for measurement: write a CPU profile to <path>.cpu from start to a clean exit (SIGTERM), and the allocations to <path>.allocs at exit")
	fs.BoolVar(&f.seccomp, "seccomp", true, "once started, confine the agent with a seccomp filter of its own: ptrace, other processes' memory, signals to others and kernel changes fail with EPERM (SECURITY.md); false is an escape hatch")
}

// registerDevices registers the flags of mode FollowDevices: where the devices of a
// container and their NUMA nodes are read.
func (f *agentFlags) registerDevices(fs *flag.FlagSet) {
	fs.StringVar(&f.podResourcesSocket, "pod-resources-socket", podresources.DefaultSocket, "the kubelet's PodResources socket, which mode FollowDevices reads "+
		"the containers' devices from (the chart mounts its directory read-only); empty: none, FollowDevices containers report DeviceAllocationsUnreadable")
	fs.DurationVar(&f.podResourcesTimeout, "pod-resources-timeout", devices.DefaultTimeout, "the bound of each read of a pod's devices (the kubelet's PodResources "+
		"and, for DRA devices, the API); a pass never waits for one, a container's creation at most "+nodeagent.DefaultDeviceCreationWait.String())
	fs.Func("dra-numa-attributes", "comma-separated DRA device attribute names (the part after a domain) whose integer value is the device's NUMA node, "+
		"first found wins (default \"numaNode\": dra.example.com/numaNode, or the driver's own numaNode)", func(v string) error {
		f.draNUMAAttributes = nil
		for _, a := range strings.Split(v, ",") {
			if a = strings.TrimSpace(a); a != "" {
				f.draNUMAAttributes = append(f.draNUMAAttributes, a)
			}
		}
		if len(f.draNUMAAttributes) == 0 {
			return errors.New("no attribute name")
		}
		return nil
	})
	fs.StringVar(&f.numaTopologyRoot, "numa-topology-root", "", "with -kernel=emulated, for tests and demos: read the NUMA nodes, their CPUs and free memory under this "+
		"sysfs-like root (its devices/system/node and devices/system/cpu) instead of the host's, emulating a host of more nodes; a cpuset.mems of every real node counts as every emulated one")
}

// defaultMetricsAddr listens on the node's own IP, not on every address of a host-network
// pod: the agent is not reachable through the node's other networks by default.
func defaultMetricsAddr(hostIP string) string {
	return net.JoinHostPort(hostIP, "8443")
}

// agentGCPercent is the agent's GOGC: a heap goal of 1.5× the live heap instead of 2×.
// At 110 selected pods it keeps ~2 MiB less resident (VmRSS 39.2 against 40.8 MiB) for no
// measurable idle CPU (BENCHMARKS.md, "The cost table").
const agentGCPercent = 50

// applyGCPercent sets agentGCPercent unless GOGC is in the environment (the runtime has
// applied that one already).
func applyGCPercent(getenv func(string) string) {
	if getenv("GOGC") == "" {
		debug.SetGCPercent(agentGCPercent)
	}
}

// parseAgentFlags parses the agent's command line (with the logger's flags) and refuses
// values the agent cannot run with.
func parseAgentFlags(args []string) (*agentFlags, error) {
	f := &agentFlags{}
	fs := flag.NewFlagSet("agent", flag.ContinueOnError)
	f.register(fs)
	if err := parseWithLogFlags(fs, args); err != nil {
		return nil, err
	}
	if f.nodeName == "" {
		return nil, errors.New("agent: -node-name (or NODE_NAME) is required")
	}
	if f.maxTasks < 1 {
		return nil, fmt.Errorf("agent: -max-tasks-per-container must be at least 1, not %d", f.maxTasks)
	}
	if err := checkTopologyRoot(f); err != nil {
		return nil, err
	}
	if f.podResourcesTimeout < 10*time.Millisecond || f.podResourcesTimeout > time.Minute {
		return nil, fmt.Errorf("agent: -pod-resources-timeout must be between 10ms and 1m, not %s", f.podResourcesTimeout)
	}
	if f.summary.maxPerNamespace < 0 {
		return nil, fmt.Errorf("agent: -max-preferences-per-namespace must be 0 (no cap) or more, not %d", f.summary.maxPerNamespace)
	}
	f.preferenceCap = agent.NewPreferenceCap(f.summary.maxPerNamespace)
	if f.nriStartGrace < time.Second || f.nriStartGrace > time.Hour {
		return nil, fmt.Errorf("agent: -nri-start-grace must be between 1s and 1h, not %s", f.nriStartGrace)
	}
	if f.migrationRate < 0 || f.migrationRate > maxMigrationRate {
		return nil, fmt.Errorf("agent: -page-migration-rate must be between 0 and %d pages per second, not %g", maxMigrationRate, f.migrationRate)
	}
	if f.migrationMaxBusy <= 0 || f.migrationMaxBusy > 1 {
		return nil, fmt.Errorf("agent: -page-migration-max-busy must be in (0, 1], not %g", f.migrationMaxBusy)
	}
	return f, nil
}

// maxMigrationRate bounds -page-migration-rate: 4 Mi pages (16 GiB of 4 KiB pages) a
// second, past any memory bandwidth a copy has.
const maxMigrationRate = 1 << 22

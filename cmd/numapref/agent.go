package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime/debug"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/numapref/numapref/controllers/agent"
	"github.com/numapref/numapref/controllers/agentcert"
	"github.com/numapref/numapref/internal/inspect"
	"github.com/numapref/numapref/internal/nodeagent"
	"github.com/numapref/numapref/internal/nodeagent/cgroups"
	"github.com/numapref/numapref/internal/nodeagent/ledger"
	"github.com/numapref/numapref/internal/nodeagent/nri"
	"github.com/numapref/numapref/internal/numa"
	"github.com/numapref/numapref/internal/numa/emulator"
	"github.com/numapref/numapref/internal/numa/prctl"
	"github.com/numapref/numapref/internal/serving"
	"github.com/numapref/numapref/internal/statedir"
)

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
	fs.DurationVar(&f.nriStartGrace, "nri-start-grace", nodeagent.DefaultStartGrace, "how long a container placed at its start keeps its placement while the API does not report it running, "+
		"counted while the API answers (a slow kubelet posts the status of a burst of new containers late); then only the API's desired state counts")
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
	fs.StringVar(&f.profile, "profile", "", "for measurement: write a CPU profile to <path>.cpu from start to a clean exit (SIGTERM), and the allocations to <path>.allocs at exit")
	fs.BoolVar(&f.seccomp, "seccomp", true, "once started, confine the agent with a seccomp filter of its own: ptrace, other processes' memory, signals to others and kernel changes fail with EPERM (SECURITY.md); false is an escape hatch")
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

func runAgent(args []string) error {
	var f agentFlags
	fs := flag.NewFlagSet("agent", flag.ContinueOnError)
	f.register(fs)
	if err := parseWithLogFlags(fs, args); err != nil {
		return err
	}
	log := ctrl.Log.WithName("agent")
	if f.nodeName == "" {
		return errors.New("agent: -node-name (or NODE_NAME) is required")
	}
	if f.maxTasks < 1 {
		return fmt.Errorf("agent: -max-tasks-per-container must be at least 1, not %d", f.maxTasks)
	}
	if f.nriStartGrace < time.Second || f.nriStartGrace > time.Hour {
		return fmt.Errorf("agent: -nri-start-grace must be between 1s and 1h, not %s", f.nriStartGrace)
	}
	applyGCPercent(os.Getenv)
	ctx := ctrl.SetupSignalHandler()
	// Before anything that reads the state dir, or starts a kernel emulator on this host.
	lock, err := holdStateDir(ctx, &f)
	if err != nil {
		return err
	}
	// Closing the lock file is what releases it; the kernel drops the lock at exit anyway.
	defer func() { _ = lock.Release() }()
	if err := adoptState(f.adoptStateFrom, f.stateDir); err != nil {
		return err
	}

	kernel, support, err := openKernel(&f)
	if err != nil {
		return err
	}
	procRoot, sysRoot := filepath.Join(f.hostRoot, "proc"), filepath.Join(f.hostRoot, "sys")
	topo, err := numa.DiscoverTopology(sysRoot)
	if err != nil {
		return fmt.Errorf("agent: reading NUMA topology: %w", err)
	}
	balancing, err := numa.ReadBalancing(procRoot)
	if err != nil {
		log.Error(err, "Reading kernel.numa_balancing; the preference only acts while it is enabled")
	} else if !balancing.Enabled() {
		log.Info("kernel.numa_balancing is disabled: preferences are set but the kernel does not act on them until it is enabled", "mode", balancing.String())
	}
	resolver, err := cgroups.NewResolver(f.hostRoot, cgroups.ResolverOptions{
		Version: f.cgroupVersion, Driver: f.cgroupDriver, CgroupRoot: f.cgroupRoot, KubeletCgroupRoot: f.kubeletCgroupRoot,
	})
	if err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	log.Info("Starting", "node", f.nodeName, "kernel", support, "numaNodes", topo.Online, "cgroups", resolver.Layout())

	var events <-chan numa.ProcEvent
	var forkFilter interface{ FilterForks(numa.ForkFilter) error }
	if f.forkEvents {
		// Forks only: the engine acts on nothing else, and the kernel drops the rest.
		pe, err := numa.OpenProcEvents(numa.ProcEventFork)
		if err != nil {
			log.Error(err, "Fork events unavailable; new processes are caught by rescans only", "rescanInterval", f.rescanInterval)
		} else {
			defer pe.Close()
			events, forkFilter = pe.Events(), pe
		}
	}
	metrics := nodeagent.NewMetrics()
	if err := metrics.Register(ctrlmetrics.Registry); err != nil {
		return fmt.Errorf("agent: registering metrics: %w", err)
	}
	// The desired state persisted in the state dir is enforced at start until the API's
	// arrives: a restart while the apiserver is unreachable keeps placing forked children.
	stateDir := statedir.New(f.stateDir)
	engine, err := nodeagent.NewEngine(nodeagent.EngineConfig{
		Resolver: resolver, Kernel: kernel, Support: support, ProcRoot: procRoot, OnlineNodes: topo.Online,
		LedgerPath:  stateDir.Ledger(),
		ChoicesPath: stateDir.Choices(),
		DesiredPath: stateDir.Desired(),
		CPUNode:     topo.CPUNode, MemFree: func(node int) (uint64, error) { return numa.ReadNodeMemFree(sysRoot, node) },
		Topology:       func() (numa.Online, error) { return numa.ReadOnline(sysRoot) }, // node and CPU hotplug
		RescanInterval: f.rescanInterval, MaxTasksPerContainer: f.maxTasks, StartGrace: f.nriStartGrace,
		ProcEvents: events, ForkFilter: forkFilter, Metrics: metrics, Log: ctrl.Log.WithName("engine"),
	})
	var ledgerDamaged error
	if errors.Is(err, ledger.ErrDamaged) {
		ledgerDamaged = err
	}
	if err != nil {
		log.Error(err, "State files unreadable: an unreadable ledger means undo covers only what the agent sets from now on, "+
			"an unreadable desired state that the agent waits for the API's")
	}
	effect := nodeagent.NewEffectCollector(engine, resolver.ProcRoot(), resolver.Layout().Version)
	if err := ctrlmetrics.Registry.Register(effect); err != nil {
		return fmt.Errorf("agent: registering effect metrics: %w", err)
	}

	// Whether the API answers, from the agent's own requests: a container placed at its
	// start keeps its placement while the API cannot confirm it.
	reach, err := agent.NewAPIReachability(ctrlmetrics.Registry, ctrl.Log.WithName("api"))
	if err != nil {
		return fmt.Errorf("agent: registering the API's reachability: %w", err)
	}
	reach.Notify(engine.SetAPIReachable)
	mgr, err := newManager(&f, reach)
	if err != nil {
		return err
	}
	if err := mgr.Add(engine); err != nil {
		return fmt.Errorf("agent: adding engine: %w", err)
	}
	facts := func() agent.NodeFacts {
		// Read on every reconcile: kernel.numa_balancing can be switched at any time.
		b, err := numa.ReadBalancing(procRoot)
		label := b.Label()
		if err != nil {
			label = "unknown"
		}
		return agent.NodeFacts{KernelSupport: kernelLabel(support), NUMABalancing: label, NUMANodes: len(topo.Online)}
	}
	opts := agent.NodeAgentOptions{
		Facts: facts, ReportInterval: f.reportInterval, LedgerDamaged: ledgerDamaged, NodeRestrictionCheck: f.restrictionCheck,
	}
	if f.nriSocket != "" {
		// What the API last said, for the starts an agent restarted during an outage sees.
		opts.Preferences = nri.NewPreferenceStore(stateDir.Preferences(), ctrl.Log.WithName("preferences"))
		plugin, err := nri.New(nri.Config{Socket: f.nriSocket, Log: ctrl.Log.WithName("nri"),
			Placer: nri.NewStartPlacer(mgr.GetClient(), engine, opts.Preferences, ctrl.Log.WithName("start"))})
		if err != nil {
			return fmt.Errorf("agent: %w", err)
		}
		if err := mgr.Add(plugin); err != nil {
			return fmt.Errorf("agent: adding the NRI plugin: %w", err)
		}
		if err := ctrlmetrics.Registry.Register(nri.NewCollector(plugin)); err != nil {
			return fmt.Errorf("agent: registering NRI metrics: %w", err)
		}
		opts.NRI = plugin
	}
	if err := agent.SetupNodeAgent(mgr, f.nodeName, engine, opts); err != nil {
		return err
	}
	if err := setupDrain(mgr, &f, engine); err != nil {
		return err
	}
	if err := addSecureServer(mgr, &f, engine); err != nil {
		return err
	}
	if f.summarize {
		if err := mgr.Add(f.summary.runnable(mgr)); err != nil {
			return fmt.Errorf("agent: adding the summarizer: %w", err)
		}
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return fmt.Errorf("agent: adding health check: %w", err)
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return fmt.Errorf("agent: adding ready check: %w", err)
	}
	stopProfile, err := startProfile(f.profile)
	if err != nil {
		return err
	}
	if err := sandboxAgent(&f); err != nil {
		return errors.Join(err, stopProfile())
	}
	return errors.Join(mgr.Start(ctx), stopProfile())
}

// openKernel picks the preferred-node backend. prctl is only ever called when the kernel
// proved it has the patch: on mainline >= 6.16 the same option number is PR_FUTEX_HASH.
func openKernel(f *agentFlags) (prctl.Kernel, numa.Support, error) {
	switch f.kernel {
	case "auto", "prctl":
		p, support := prctl.New(f.prctlOption, "/proc")
		if !support.Supported && f.kernel == "prctl" {
			return nil, support, fmt.Errorf("agent: -kernel=prctl but the kernel does not support it: %s", support.Reason)
		}
		return p, support, nil
	case "emulated":
		e, err := emulator.New(emulator.Options{
			StateDir: f.emulatorStateDir, ProcRoot: filepath.Join(f.hostRoot, "proc"), SysRoot: filepath.Join(f.hostRoot, "sys"), ForkEvents: f.forkEvents,
		})
		if err != nil {
			return nil, numa.Support{}, fmt.Errorf("agent: starting the kernel emulator: %w", err)
		}
		return e, e.Support(), nil
	default:
		return nil, numa.Support{}, fmt.Errorf("agent: -kernel must be auto, prctl or emulated, not %q", f.kernel)
	}
}

// addSecureServer serves /metrics and GET /inspect/<namespace>/<pod> on the metrics port
// (internal/serving): HTTPS with the certificate of -tls-cert-dir, every request's token
// reviewed (TokenReview) for the route's audiences and get on its URL authorized
// (SubjectAccessReview); inspect also asks get on the pod. Inspect takes only tokens bound
// to serving.AgentAudience: what kubectl numapref sends cannot be replayed against the API
// server. Without -metrics-secure the manager serves plain metrics and inspect is not
// served: it would show this node's pods to anyone who can reach the port. Pods are read
// from the manager's cache, which holds this node's only.
func addSecureServer(mgr ctrl.Manager, f *agentFlags, engine *nodeagent.Engine) error {
	log := ctrl.Log.WithName("agent")
	if !f.secureMetrics {
		log.Info("Inspect endpoint disabled: it is only served with -metrics-secure")
		return nil
	}
	if f.metricsAddr == "0" {
		return nil
	}
	cs, err := newReviewClients(mgr.GetConfig(), mgr.GetHTTPClient())
	if err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	policy, skipped := serving.LearnTokenPolicy(ctx, mgr.GetConfig(), cs.discovery.RESTClient())
	log.Info("Tokens are checked locally before any review", "issuer", policy.Issuer, "apiAudiences", policy.APIAudiences, "notChecked", skipped)
	auth, err := serving.NewAuth(serving.AuthOptions{
		Tokens: cs.authentication.TokenReviews(), Access: cs.authorization.SubjectAccessReviews(),
		TTLs: serving.DefaultCacheTTLs(), Policy: policy,
	})
	if err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	cache := mgr.GetCache()
	pods := func(ctx context.Context, namespace, name string) (*corev1.Pod, error) {
		pod := &corev1.Pod{}
		return pod, cache.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, pod)
	}
	getCert, err := nodeCertificate(mgr, f, cs)
	if err != nil {
		return err
	}
	srv, err := serving.NewServer(serving.Options{
		BindAddress: f.metricsAddr, CertDir: f.tlsCertDir, GetCertificate: getCert, Auth: auth, Limits: serving.DefaultLimits(), Log: ctrl.Log.WithName("serving"),
		Routes: serving.AgentRoutes(
			promhttp.HandlerFor(ctrlmetrics.Registry, promhttp.HandlerOpts{ErrorHandling: promhttp.HTTPErrorOnError}),
			inspect.PathPrefix, inspect.NewHandler(nodeagent.NewPodInspector(f.nodeName, pods, engine), auth),
			f.metricsAgentOnly),
	})
	if err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	if err := mgr.Add(srv); err != nil {
		return fmt.Errorf("agent: adding the metrics and inspect server: %w", err)
	}
	return nil
}

// nodeCertificate, with -tls-node-certificate, obtains and renews this node's own serving
// certificate through the CSR API (agentcert.NodeCertificate) and returns where the server
// gets it; otherwise nil (the certificate of -tls-cert-dir). Until the first is issued the
// TLS port serves nothing and the agent is not ready ("serving-certificate").
func nodeCertificate(mgr ctrl.Manager, f *agentFlags, cs agentcert.NodeCertificateClient) (func(*tls.ClientHelloInfo) (*tls.Certificate, error), error) {
	if !f.nodeCertificate {
		return nil, nil
	}
	if f.tlsCertDir != "" {
		return nil, errors.New("agent: -tls-node-certificate and -tls-cert-dir are exclusive")
	}
	c := &agentcert.NodeCertificate{Client: cs, Node: f.nodeName, Lifetime: f.nodeCertLifetime, Log: ctrl.Log.WithName("node-certificate")}
	if err := mgr.Add(c); err != nil {
		return nil, fmt.Errorf("agent: adding the node certificate: %w", err)
	}
	if err := mgr.AddReadyzCheck("serving-certificate", c.Ready); err != nil {
		return nil, fmt.Errorf("agent: adding the node certificate's ready check: %w", err)
	}
	return c.GetCertificate, nil
}

func kernelLabel(s numa.Support) string {
	if !s.Supported {
		return "unsupported"
	}
	return s.Backend
}

func newManager(f *agentFlags, reach *agent.APIReachability) (ctrl.Manager, error) {
	cfg, scheme, err := apiClientSetup("agent", f.kubeconfig)
	if err != nil {
		return nil, err
	}
	reach.Instrument(cfg)
	// Secure metrics are served by addSecureServer, not by the manager.
	metrics := metricsserver.Options{BindAddress: f.metricsAddr}
	if f.secureMetrics {
		metrics.BindAddress = "0"
	}
	// No leader election for the agent's own manager: its work is its node's. The
	// summarizer campaigns on its own (summarizer.RunSummarizer), so that losing its lease
	// never ends the agent.
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 scheme,
		Cache:                  agent.NodeCacheOptions(f.nodeName),
		MapperProvider:         agent.NodeRESTMapper, // starts while the API is unreachable
		Metrics:                metrics,
		HealthProbeBindAddress: f.probeAddr,
	})
	if err != nil {
		return nil, fmt.Errorf("agent: creating manager: %w", err)
	}
	return mgr, nil
}

// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/go-logr/logr"
	"github.com/numapref/numapref/controllers/agent"
	"github.com/numapref/numapref/internal/metrics"
	"github.com/numapref/numapref/internal/nodeagent"
	"github.com/numapref/numapref/internal/nodeagent/cgroups"
	"github.com/numapref/numapref/internal/nodeagent/ledger"
	"github.com/numapref/numapref/internal/nodeagent/migration"
	"github.com/numapref/numapref/internal/nodeagent/nri"
	"github.com/numapref/numapref/internal/numa"
	"github.com/numapref/numapref/internal/numa/emulator"
	"github.com/numapref/numapref/internal/numa/mempolicy"
	"github.com/numapref/numapref/internal/numa/migrate"
	"github.com/numapref/numapref/internal/numa/prctl"
	"github.com/numapref/numapref/internal/statedir"
)

// runAgent is the agent's composition root: it holds the state dir, learns the node, builds
// the engine and adds the engine, the controllers and the servers to one manager.
func runAgent(args []string) error {
	f, err := parseAgentFlags(args)
	if err != nil {
		return err
	}
	applyGCPercent(os.Getenv)
	ctx := ctrl.SetupSignalHandler()
	// Before anything that reads the state dir, or starts a kernel emulator on this host.
	lock, err := holdStateDir(ctx, f)
	if err != nil {
		return err
	}
	// Closing the lock file is what releases it; the kernel drops the lock at exit anyway.
	defer func() { _ = lock.Release() }()
	if err := adoptState(f.adoptStateFrom, f.stateDir); err != nil {
		return err
	}
	host, err := openHost(f)
	if err != nil {
		return err
	}
	forks := openForkEvents(f)
	defer forks.close()
	engine, err := newAgentEngine(f, host, forks)
	if err != nil {
		return err
	}
	// Whether the API answers, from the agent's own requests: a container placed at its
	// start keeps its placement while the API cannot confirm it.
	reach, err := agent.NewAPIReachability(ctrlmetrics.Registry, ctrl.Log.WithName("api"))
	if err != nil {
		return fmt.Errorf("agent: registering the API's reachability: %w", err)
	}
	reach.Notify(engine.SetAPIReachable)
	mgr, err := newManager(f, reach)
	if err != nil {
		return err
	}
	if err := addAgentRunnables(mgr, f, host, engine); err != nil {
		return err
	}
	stopProfile, err := startProfile(f.profile)
	if err != nil {
		return err
	}
	if err := sandboxAgent(f); err != nil {
		return errors.Join(err, stopProfile())
	}
	return errors.Join(mgr.Start(ctx), stopProfile())
}

// agentHost is what the agent learns of its node before it places anything.
type agentHost struct {
	kernel            prctl.Kernel
	support           numa.Support
	procRoot, sysRoot string
	topo              *numa.Topology
	resolver          *cgroups.Resolver
	// policies is what the kernel's set_mempolicy takes: the memory policy a container gets
	// at creation.
	policies mempolicy.Support
	// mover moves containers' pages to their home; nil when this node moves none
	// (-page-migration-rate 0, or a kernel without page migration).
	mover *migration.Worker
}

// openHost opens the kernel backend and reads the node's NUMA topology and cgroup layout.
func openHost(f *agentFlags) (*agentHost, error) {
	log := ctrl.Log.WithName("agent")
	h := &agentHost{procRoot: filepath.Join(f.hostRoot, "proc"), sysRoot: topologyRoot(f)}
	var err error
	if h.kernel, h.support, err = openKernel(f); err != nil {
		return nil, err
	}
	if h.topo, err = numa.DiscoverTopology(h.sysRoot); err != nil {
		return nil, fmt.Errorf("agent: reading NUMA topology: %w", err)
	}
	if h.policies, err = mempolicy.Probe(); err != nil {
		h.policies = policiesOfRelease(log, err, h.topo.Online)
	}
	balancing, err := numa.ReadBalancing(h.procRoot)
	if err != nil {
		log.Error(err, "Reading kernel.numa_balancing; the preference only acts while it is enabled")
	} else if !balancing.Enabled() {
		log.Info("kernel.numa_balancing is disabled: preferences are set but the kernel does not act on them until it is enabled", "mode", balancing.String())
	}
	h.resolver, err = cgroups.NewResolver(f.hostRoot, cgroups.ResolverOptions{
		Version: f.cgroupVersion, Driver: f.cgroupDriver, CgroupRoot: f.cgroupRoot, KubeletCgroupRoot: f.kubeletCgroupRoot,
	})
	if err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	log.Info("Starting", "node", f.nodeName, "kernel", h.support, "memoryPolicies", h.policies, "numaNodes", h.topo.Online, "cgroups", h.resolver.Layout())
	return h, nil
}

// openPageMover makes the worker that moves containers' pages to their home at
// -page-migration-rate, when that is above 0 and the kernel has page migration (a
// move_pages(2) of no page of the agent's own process, which makes the kernel's checks and
// moves nothing). nil otherwise: the node's report leaves out mechanism migrate.
func openPageMover(f *agentFlags, procRoot string, metrics migration.Metrics) *migration.Worker {
	log := ctrl.Log.WithName("agent")
	if f.migrationRate == 0 {
		return nil
	}
	if err := migrate.Permitted(os.Getpid()); err != nil {
		log.Error(err, "Page migration unavailable: no container's pages are moved (spec.pageMigration)")
		return nil
	}
	w, err := migration.New(&migrate.Mover{ProcRoot: procRoot}, migration.Options{Rate: f.migrationRate, MaxBusy: f.migrationMaxBusy}, nil, metrics)
	if err != nil {
		log.Error(err, "Page migration unavailable")
		return nil
	}
	log.Info("Page migration available", "pagesPerSecond", f.migrationRate, "maxBusy", f.migrationMaxBusy)
	return w
}

// policiesOfRelease is what the kernel takes of the memory policies, by its release, when
// the agent may not probe them (probeErr: a seccomp profile that allows get_mempolicy only
// with CAP_SYS_NICE); none when the release says nothing either.
func policiesOfRelease(log logr.Logger, probeErr error, online []int) mempolicy.Support {
	var uts unix.Utsname
	node := 0
	if len(online) > 0 {
		node = online[0]
	}
	err := unix.Uname(&uts)
	if err == nil {
		var s mempolicy.Support
		if s, err = mempolicy.SupportOfRelease(unix.ByteSliceToString(uts.Release[:]), node); err == nil {
			log.Info("Memory policies known by the kernel's release: this agent may not probe them", "probe", probeErr.Error(), "policies", s)
			return s
		}
	}
	log.Error(errors.Join(probeErr, err), "Reading the kernel's memory policies; no container gets one at creation")
	return mempolicy.Support{Node: -1}
}

// forkSource is the proc connector's socket, subscribed to forks, which the engine reads
// and filters; nil without -fork-events or when the connector cannot be opened.
type forkSource struct {
	conn  *numa.ProcConn
	close func()
}

func openForkEvents(f *agentFlags) forkSource {
	none := forkSource{close: func() {}}
	if !f.forkEvents {
		return none
	}
	// Forks only: the engine acts on nothing else, and the kernel drops the rest.
	pc, err := numa.DialProcConnector(numa.ProcEventFork)
	if err != nil {
		ctrl.Log.WithName("agent").Error(err, "Fork events unavailable; new processes are caught by rescans only", "rescanInterval", f.rescanInterval)
		return none
	}
	return forkSource{conn: pc, close: func() { _ = pc.Close() }}
}

// agentEngine is the engine and, when the state dir's ledger could not be read, why: the
// node's report says so (undo covers only what the agent sets from then on).
type agentEngine struct {
	*nodeagent.Engine
	ledgerDamaged error
	devices       agentDevices
}

// newAgentEngine builds the engine on the state dir and registers its metrics. An
// unreadable state file is logged, not fatal.
func newAgentEngine(f *agentFlags, h *agentHost, forks forkSource) (agentEngine, error) {
	metrics := nodeagent.NewMetrics()
	if err := metrics.Register(ctrlmetrics.Registry); err != nil {
		return agentEngine{}, fmt.Errorf("agent: registering metrics: %w", err)
	}
	// The desired state persisted in the state dir is enforced at start until the API's
	// arrives: a restart while the apiserver is unreachable keeps placing forked children.
	stateDir := statedir.New(f.stateDir)
	sysRoot := h.sysRoot
	h.mover = openPageMover(f, h.procRoot, metrics.Migration())
	devs, err := openDevices(f)
	if err != nil {
		return agentEngine{}, err
	}
	resolver, err := engineResolver(f, h)
	if err != nil {
		return agentEngine{}, err
	}
	cfg := nodeagent.EngineConfig{
		Resolver: resolver, Kernel: h.kernel, Support: h.support, Policies: h.policies, ProcRoot: h.procRoot, OnlineNodes: h.topo.Online,
		LedgerPath:  stateDir.Ledger(),
		ChoicesPath: stateDir.Choices(),
		DesiredPath: stateDir.Desired(),
		CPUNode:     h.topo.CPUNode, MemFree: func(node int) (uint64, error) { return numa.ReadNodeMemFree(sysRoot, node) },
		Topology:       func() (numa.Online, error) { return numa.ReadOnline(sysRoot) }, // node and CPU hotplug
		RescanInterval: f.rescanInterval, MaxTasksPerContainer: f.maxTasks, StartGrace: f.nriStartGrace,
		Metrics: metrics, Log: ctrl.Log.WithName("engine"),
		PageMover: pageMover(h.mover),
		Devices:   devs.reader, DevicesTimeout: f.podResourcesTimeout, DevicesMetrics: devs.metrics,
	}
	if forks.conn != nil {
		cfg.ForkReader = forks.conn
	}
	engine, err := nodeagent.NewEngine(cfg)
	var ledgerDamaged error
	if errors.Is(err, ledger.ErrDamaged) {
		ledgerDamaged = err
	}
	if err != nil {
		ctrl.Log.WithName("agent").Error(err, "State files unreadable: an unreadable ledger means undo covers only what the agent sets from now on, "+
			"an unreadable desired state that the agent waits for the API's")
	}
	effect := nodeagent.NewEffectCollector(engine, h.resolver.ProcRoot(), h.resolver.Layout().Version)
	if err := ctrlmetrics.Registry.Register(effect); err != nil {
		return agentEngine{}, fmt.Errorf("agent: registering effect metrics: %w", err)
	}
	return agentEngine{Engine: engine, ledgerDamaged: ledgerDamaged, devices: devs}, nil
}

// addAgentRunnables adds the engine, placing at start, the node's controllers, the drain,
// the HTTPS port, the summarizer (with -leader-elect) and the health checks to mgr.
func addAgentRunnables(mgr ctrl.Manager, f *agentFlags, h *agentHost, ae agentEngine) error {
	engine := ae.Engine
	ae.devices.dra.bind(agent.NewDRATopology(mgr.GetAPIReader(), f.nodeName, f.draNUMAAttributes))
	if err := mgr.Add(engine); err != nil {
		return fmt.Errorf("agent: adding engine: %w", err)
	}
	if h.mover != nil {
		if err := mgr.Add(runMover(h.mover)); err != nil {
			return fmt.Errorf("agent: adding the page mover: %w", err)
		}
	}
	facts := func() agent.NodeFacts {
		// Read on every reconcile: kernel.numa_balancing can be switched at any time.
		b, err := numa.ReadBalancing(h.procRoot)
		label := b.Label()
		if err != nil {
			label = "unknown"
		}
		return agent.NodeFacts{KernelSupport: kernelLabel(h.support), NUMABalancing: label, NUMANodes: len(h.topo.Online),
			MemoryPolicies: h.policies.Preferred || h.policies.PreferredMany, PageMigration: h.mover != nil}
	}
	opts := agent.NodeAgentOptions{
		Facts: facts, ReportInterval: f.reportInterval, LedgerDamaged: ae.ledgerDamaged, NodeRestrictionCheck: f.restrictionCheck,
		// The node's UID, which tells the kubelet's mirror pods, as the reconciler reads it.
		Node:          cgroups.NewNodeIdentity(f.nodeName),
		PreferenceCap: f.preferenceCap,
	}
	if err := addStartPlacing(mgr, f, engine, &opts); err != nil {
		return err
	}
	if err := agent.SetupNodeAgent(mgr, f.nodeName, engine, opts); err != nil {
		return err
	}
	if err := setupDrain(mgr, f, engine); err != nil {
		return err
	}
	if err := addSecureServer(mgr, f, engine, opts.Node); err != nil {
		return err
	}
	if err := addPageOut(mgr); err != nil {
		return err
	}
	if f.summarize {
		if err := mgr.Add(f.summary.runnable(mgr)); err != nil {
			return fmt.Errorf("agent: adding the summarizer: %w", err)
		}
	}
	return addHealthChecks(mgr, "agent")
}

// addStartPlacing, with -nri-socket, registers the agent as an NRI plugin that places each
// selected container as the runtime starts it, and gives the node's controllers the plugin
// and the PreferenceStore.
func addStartPlacing(mgr ctrl.Manager, f *agentFlags, engine *nodeagent.Engine, opts *agent.NodeAgentOptions) error {
	if f.nriSocket == "" {
		return nil
	}
	// What the API last said, for the starts an agent restarted during an outage sees.
	opts.Preferences = nri.NewPreferenceStore(statedir.New(f.stateDir).Preferences(), ctrl.Log.WithName("preferences"))
	plugin, err := nri.New(nri.Config{Socket: f.nriSocket, Log: ctrl.Log.WithName("nri"),
		Placer: nri.NewStartPlacer(mgr.GetClient(), opts.Node, engine, opts.Preferences, ctrl.Log.WithName("start"))})
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
	// The runtime can be asked once it has served NRI: a runtime without NRI (containerd
	// 1.6) leaves Auto's containers KernelUnsupported, not waiting for a policy.
	engine.SetPolicyRuntime(func() bool { return plugin.Connected() || plugin.Stats().Connects > 0 })
	if f.nriRequired {
		err := mgr.AddReadyzCheck("nri", func(*http.Request) error {
			if !plugin.Connected() {
				return errors.New("not registered with the container runtime's NRI (--nri-required)")
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("agent: adding the NRI readiness check: %w", err)
		}
	}
	return nil
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
			TopologyRoot: f.numaTopologyRoot,
		})
		if err != nil {
			return nil, numa.Support{}, fmt.Errorf("agent: starting the kernel emulator: %w", err)
		}
		return e, e.Support(), nil
	default:
		return nil, numa.Support{}, fmt.Errorf("agent: -kernel must be auto, prctl or emulated, not %q", f.kernel)
	}
}

func kernelLabel(s numa.Support) string {
	if !s.Supported {
		return "unsupported"
	}
	return s.Backend
}

func newManager(f *agentFlags, reach *agent.APIReachability) (ctrl.Manager, error) {
	cfg, scheme, err := apiClientSetup("agent", f.kubeconfig, metrics.RegisterControllers)
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
		Cache:                  agent.NodeCacheOptions(f.nodeName, f.preferenceCap),
		MapperProvider:         agent.NodeRESTMapper, // starts while the API is unreachable
		Metrics:                metrics,
		HealthProbeBindAddress: f.probeAddr,
	})
	if err != nil {
		return nil, fmt.Errorf("agent: creating manager: %w", err)
	}
	return mgr, nil
}

// pageMover is the engine's view of w: nil (no interface value holding a nil pointer)
// when the node moves no pages.
func pageMover(w *migration.Worker) nodeagent.PageMover {
	if w == nil {
		return nil
	}
	return w
}

// runMover runs the page mover while the manager runs, and stops it after the step it
// runs, if any.
func runMover(w *migration.Worker) manager.RunnableFunc {
	return func(ctx context.Context) error {
		w.Start()
		<-ctx.Done()
		w.Stop()
		return nil
	}
}

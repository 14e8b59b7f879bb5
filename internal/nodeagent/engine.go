// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package nodeagent

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/utils/clock"

	"github.com/numapref/numapref/internal/metrics"
	"github.com/numapref/numapref/internal/nodeagent/cgroups"
	"github.com/numapref/numapref/internal/nodeagent/desire"
	"github.com/numapref/numapref/internal/nodeagent/devices"
	"github.com/numapref/numapref/internal/nodeagent/ledger"
	"github.com/numapref/numapref/internal/nodeagent/plan"
	"github.com/numapref/numapref/internal/numa"
	"github.com/numapref/numapref/internal/numa/mempolicy"
	"github.com/numapref/numapref/internal/numa/prctl"
)

// cgroupResolver finds a container's cgroup and lists its tasks. It only reads.
type cgroupResolver interface {
	plan.Cgroups
	ThreadIDs(c *cgroups.Container) ([]int, error) // membership checks around SETs
}

// EngineConfig wires an Engine to the host.
type EngineConfig struct {
	Resolver cgroupResolver
	Kernel   prctl.Kernel
	// Support says whether Kernel may be called at all; when not, nothing is applied and
	// every container reports KernelUnsupported.
	Support numa.Support
	// ProcRoot is the host's /proc: tasks' identity (start times), the boot id and
	// kernel.numa_balancing are read under it. Empty means "/proc".
	ProcRoot string
	// OnlineNodes are the NUMA nodes this host has online, and CPUNode maps each CPU to its
	// NUMA node (FollowCPUs). Topology, when not nil, reads both again at a full pass when
	// it is due (node and CPU hotplug; numa.ReadOnline; topologyDue), and these two are
	// then only what the engine starts with.
	OnlineNodes []int
	CPUNode     map[int]int
	Topology    func() (numa.Online, error)
	// LedgerPath is the file that remembers what the agent set, across restarts;
	// ChoicesPath the one that keeps the automatic modes' sticky choices; DesiredPath the
	// one that keeps the last desired state, which a restarted agent enforces until the
	// API's arrives (desiredstate.go).
	LedgerPath, ChoicesPath, DesiredPath string
	// MemFree reads a node's free memory in bytes (MostFreeMemory; nil counts none).
	MemFree func(node int) (uint64, error)
	// Devices reads the devices the kubelet allocated to a pod's containers (FollowDevices:
	// the kubelet's PodResources API); nil: none can be read. Each read is bounded by
	// DevicesTimeout (devices.DefaultTimeout when 0) and counted in DevicesMetrics; a
	// creation waits for one at most DeviceCreationWait (DefaultDeviceCreationWait when 0).
	Devices            devices.Reader
	DevicesTimeout     time.Duration
	DevicesMetrics     *metrics.Devices
	DeviceCreationWait time.Duration
	// Policies is what the kernel's set_mempolicy takes (mempolicy.Probe): the memory
	// policy a container gets at creation (PolicyAtCreation).
	Policies mempolicy.Support
	// PolicyRuntime, when not nil, says whether the runtime can be asked for a memory
	// policy at creation (it has served the agent's NRI plugin); nil means it cannot. It
	// can also be set after NewEngine, before Start (SetPolicyRuntime).
	PolicyRuntime func() bool
	// PageMover, when not nil, moves containers' pages to their home (mechanism migrate,
	// spec.pageMigration): migration.Worker, started and stopped by the caller. nil means
	// this node moves no pages.
	PageMover PageMover
	// RescanInterval is how often every container is checked again (forks reset the
	// preference of the child, so new processes must be caught).
	RescanInterval time.Duration
	// ForkReader, when not nil, is the proc connector's socket (numa.ProcConn, subscribed
	// to forks): a goroutine of the engine's reads it and runs each fork's pass as it reads
	// the event, with no queue and no other goroutine between the socket and the pass
	// (readForks). ProcEvents, when not nil, delivers fork events through a channel to the
	// apply loop instead (fakes of the unit tests). Either way new tasks are handled at once.
	ForkReader forkReader
	ProcEvents <-chan numa.ProcEvent
	// ForkFilter, when not nil, is the filter of the socket behind ForkReader or
	// ProcEvents: the engine narrows it to the forks it may act on (forkfilter.go). A
	// ForkReader that filters is its own by default.
	ForkFilter forkFilterer
	// ForkRetryDelays are the looks a fork pass takes again when it did not list the new
	// task (see DefaultForkRetryDelays); nil means the default.
	ForkRetryDelays []time.Duration
	// StartGrace is how long a desire learnt at a container's start (PlaceAtStart) counts
	// while the API's desired state does not hold the container running; 0 means
	// DefaultStartGrace.
	StartGrace time.Duration
	// Metrics receives the engine's measurements; nil makes unregistered ones.
	Metrics *Metrics
	// Clock runs the rescan ticker and the fork retries' timers, and times passes and
	// fork events' arrivals; nil means the real clock. (The fork-lag metric also reads the
	// kernel's CLOCK_MONOTONIC, which the proc connector stamps events with, through
	// Monotonic: no Clock stands for that one.)
	Clock clock.WithTickerAndDelayedExecution
	// Monotonic reads CLOCK_MONOTONIC in ns (false if it cannot); nil means numa.MonotonicNs.
	Monotonic func() (uint64, bool)
	// Boottime reads CLOCK_BOOTTIME in ns (false if it cannot), the clock tasks' start
	// times count on, for numapref_start_to_placed_seconds; nil means numa.BoottimeNs.
	Boottime func() (uint64, bool)
	Log      logr.Logger

	// MaxTasksPerContainer is one container's share of what the agent keeps per task for
	// the whole node (ledger entries, pidfds): a container with more tasks gets
	// TooManyTasks and nothing else, so it cannot starve the node's other containers. 0
	// means DefaultMaxTasksPerContainer; it is never more than the ledger can hold.
	MaxTasksPerContainer int

	// ledgerLimit bounds the ledger file (default ledger.DefaultLimit); tests make it small.
	ledgerLimit int
	// journalCompactAt is the journal's size past which a full pass compacts it, unless
	// the snapshot is larger (default ledger.CompactMin); tests make it small.
	journalCompactAt int
	// handles opens the pidfds that identify tasks around their SETs (default
	// plan.OpenPIDFD; tests of fake tasks have none), and maxPIDFDs bounds how many a pass
	// holds at once (default plan.PIDFDBound).
	handles   plan.PIDFDOpener
	maxPIDFDs int
	// hooks are the test seams of a pass.
	hooks engineHooks
}

// withDefaults is the config with every unset setting at its default.
func (cfg EngineConfig) withDefaults() EngineConfig {
	cfg.RescanInterval = or(cfg.RescanInterval, 10*time.Second)
	cfg.StartGrace = or(cfg.StartGrace, DefaultStartGrace)
	cfg.ledgerLimit = or(cfg.ledgerLimit, ledger.DefaultLimit)
	cfg.journalCompactAt = or(cfg.journalCompactAt, ledger.CompactMin)
	cfg.MaxTasksPerContainer = taskShare(cfg.MaxTasksPerContainer, cfg.ledgerLimit)
	if cfg.maxPIDFDs == 0 {
		cfg.maxPIDFDs = plan.PIDFDBound() // at most half the open files the process may have
	}
	if f, ok := cfg.ForkReader.(forkFilterer); ok && cfg.ForkFilter == nil {
		cfg.ForkFilter = f
	}
	if cfg.ForkRetryDelays == nil {
		cfg.ForkRetryDelays = DefaultForkRetryDelays
	}
	if cfg.Metrics == nil {
		cfg.Metrics = NewMetrics()
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.MemFree == nil {
		cfg.MemFree = func(int) (uint64, error) { return 0, nil }
	}
	if cfg.handles == nil {
		cfg.handles = plan.OpenPIDFD
	}
	if cfg.ProcRoot == "" {
		cfg.ProcRoot = "/proc"
	}
	if cfg.Monotonic == nil {
		cfg.Monotonic = numa.MonotonicNs
	}
	if cfg.Boottime == nil {
		cfg.Boottime = numa.BoottimeNs
	}
	return cfg
}

// or is v, or def when v is not positive.
func or[T int | time.Duration](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}

// Engine applies the desired preferred nodes to the tasks of this host's containers, keeps
// them as tasks come and go, and undoes what it set when a container is no longer selected.
// It holds the owners of what lasts from pass to pass, and runs the passes, each of which
// builds its own state (pass.go). Only the engine SETs, records and undoes (apply.go).
type Engine struct {
	cfg EngineConfig
	// passMu runs one pass at a time; it guards forks and placements, and the ledger's
	// entries a pass reads (the ledger has its own lock besides: the start lane).
	passMu sync.Mutex
	// startMu runs one start lane at a time (start.go): placing a container at its start
	// never waits for passMu; lane holds what it learnt for the next pass.
	startMu sync.Mutex
	lane    laneNotes
	kick    chan struct{} // a full pass is due (the desire changed, a ledger write to retry)
	// desires is what the engine is asked to place (desires.go); it has its own lock.
	desires *desires
	// forks follows the listed processes and their fork events (forktracker.go).
	forks *forkTracker
	// placements remembers the automatic modes' choices, the topology and how each
	// container was placed (placements.go).
	placements *placementMemory
	// published is the last pass's results, for readers; it has its own lock.
	published *published
	// ledger is what the agent set, written ahead of every SET.
	ledger *ledger.Store
	// ledgerRetry is set while a pass is scheduled to retry a failed ledger write.
	ledgerRetry atomic.Bool
	// asked are the memory policies the runtime was asked for at creation, and policies
	// those read of running containers (create.go).
	asked    *askedPolicies
	policies *readPolicies
	// moves are the page migrations asked for each container (pagemoves.go).
	moves *pageMoves
	// devices are the FollowDevices containers' devices (devicecache.go).
	devices *deviceOwner
}

// NewEngine makes an engine and loads its ledger, its sticky choices and the persisted
// desired state. A damaged file is not fatal: the error is returned beside a working
// engine so the caller can report it.
func NewEngine(cfg EngineConfig) (*Engine, error) {
	cfg = cfg.withDefaults()
	cfg.Metrics.reportKernel(cfg.Support.Backend, cfg.Support.Supported)
	cfg.Metrics.reportBalancing(cfg.ProcRoot)
	store, lerr := openLedger(cfg)
	placements, cerr := newPlacementMemory(cfg, store.View())
	e := &Engine{
		cfg: cfg, kick: make(chan struct{}, 1), ledger: store, placements: placements,
		desires: newDesires(cfg), forks: newForkTracker(cfg), published: newPublished(), asked: newAskedPolicies(),
		policies: newReadPolicies(cfg.ProcRoot), moves: newPageMoves(cfg.PageMover),
	}
	e.devices = newDeviceOwner(cfg, e.kick)
	return e, errors.Join(lerr, cerr, e.loadDesired())
}

// openLedger opens the ledger at cfg's path, for the kernel's boot.
func openLedger(cfg EngineConfig) (*ledger.Store, error) {
	bootID, _ := numa.ReadBootID(cfg.ProcRoot) // "" where the kernel has none
	s, err := ledger.Open(cfg.LedgerPath, ledger.Options{Limit: cfg.ledgerLimit, CompactAt: cfg.journalCompactAt,
		BootID: bootID, Log: cfg.Log, Step: cfg.hooks.journalStep})
	if errors.Is(err, ledger.ErrDamaged) {
		cfg.Metrics.reportLedgerDamaged()
	}
	return s, err
}

// SetDesired replaces the whole desired state of this host (but for the starts it does not
// hold yet: PlaceAtStart). The first call marks the engine synced: before it the engine
// does nothing, so a restarted agent never undoes work whose desire it simply has not read
// yet. A desired state persisted by the last run (DesiredPath) counts as a first call; the
// live one replaces it.
func (e *Engine) SetDesired(ds []desire.Desire) {
	if e.desires.set(ds) {
		signal(e.kick)
	}
}

// SetPolicyRuntime sets EngineConfig.PolicyRuntime; call it before Start.
func (e *Engine) SetPolicyRuntime(connected func() bool) { e.cfg.PolicyRuntime = connected }

// Results returns a copy of the last pass's results.
func (e *Engine) Results() map[desire.ContainerKey]plan.Result { return e.published.results() }

// Changes delivers a signal after a pass whose results differ from the previous ones.
func (e *Engine) Changes() <-chan struct{} { return e.published.changes }

// Start runs the apply loop until ctx ends: a pass when the desired state changes, on every
// rescan tick, and for one container when one of its processes forks.
func (e *Engine) Start(ctx context.Context) error {
	tick := e.cfg.Clock.NewTicker(e.cfg.RescanInterval)
	defer tick.Stop()
	if e.cfg.ForkReader != nil {
		read := make(chan struct{})
		go e.readForks(ctx, read)
		defer func() {
			if err := e.cfg.ForkReader.StopReading(); err != nil {
				e.cfg.Log.Error(err, "Stopping the fork events' reader")
			}
			<-read
		}()
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-e.kick:
			e.Pass()
		case <-tick.C():
			e.Pass()
		case ev, ok := <-e.cfg.ProcEvents:
			if !ok {
				e.cfg.ProcEvents = nil // closed: rescans still keep the preference
				continue
			}
			e.onProcEvent(ev)
		case <-e.forks.markDue:
			e.markForks()
		case r := <-e.forks.retries:
			e.forkPass(r.key, r.fork)
			e.retryUnlisted(r.key, r.fork, r.attempt)
		}
	}
}

// NeedLeaderElection is false: every node's agent works on its own node.
func (e *Engine) NeedLeaderElection() bool { return false }

// Pass checks every desired container once and undoes what is no longer desired.
func (e *Engine) Pass() { e.fullPass() }

// Drain undoes everything the agent set, for an uninstall: from its call on the engine
// ignores SetDesired and fork events, and its passes (this one, rescans) run with an empty
// desire, which undoes every ledger entry and places nothing. The empty desire is also
// persisted, so an agent restarted before its state is removed enforces nothing. It
// returns how many containers still have ledger entries: those whose undo failed (the
// kernel refused, or a cgroup could not be read); a later pass tries them again.
func (e *Engine) Drain() int {
	e.desires.drain()
	e.fullPass()
	e.passMu.Lock()
	defer e.passMu.Unlock()
	return e.ledger.Len()
}

// kernelReader is the engine's kernel as planning gets it: it has only Get, so not even a
// type assertion in planning finds the kernel's Set.
type kernelReader struct{ k numa.PreferredNodeReader }

func (r kernelReader) Get(tid int) (int, error) { return r.k.Get(tid) }

// signal wakes c's reader unless a wake-up is already pending.
func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

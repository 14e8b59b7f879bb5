package nodeagent

import (
	"context"
	"errors"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/utils/clock"

	"github.com/numapref/numapref/internal/cpuset"
	"github.com/numapref/numapref/internal/nodeagent/cgroups"
	"github.com/numapref/numapref/internal/numa"
	"github.com/numapref/numapref/internal/numa/prctl"
)

// cgroupResolver finds a container's cgroup and lists its tasks. It only reads.
type cgroupResolver interface {
	Resolve(ref cgroups.ContainerRef) (*cgroups.Container, error)
	ListTIDs(c *cgroups.Container) ([]cgroups.TaskRef, error)
	ThreadIDs(c *cgroups.Container) ([]int, error) // membership checks around SETs
	Cpuset(c *cgroups.Container) (cpuset.Cpuset, error)
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
	// RescanInterval is how often every container is checked again (forks reset the
	// preference of the child, so new processes must be caught).
	RescanInterval time.Duration
	// ProcEvents, when not nil, delivers fork events so new tasks are handled at once.
	ProcEvents <-chan numa.ProcEvent
	// ForkFilter, when not nil, is the filter of the socket behind ProcEvents: the engine
	// narrows it to the forks it may act on (forkfilter.go).
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

	// ledgerLimit bounds the ledger file (default defaultLedgerLimit); tests make it small.
	ledgerLimit int
	// journalCompactAt is the journal's size past which a full pass compacts it, unless
	// the snapshot is larger (default journalCompactMin); tests make it small.
	journalCompactAt int
	// handles opens the pidfds that identify tasks around their SETs (default openPIDFD;
	// tests of fake tasks have none).
	handles pidfdOpener
	// hooks are the test seams of a pass.
	hooks engineHooks
}

// ContainerResult is what the engine achieved for one container on its last pass.
type ContainerResult struct {
	Desire Desire
	// Reason is Applied, or why the container was skipped or failed.
	Reason  string
	Message string
	// Node is the NUMA node the container prefers: the desire's for Static, the one chosen
	// on this host for the automatic modes; Why says how it was chosen ("" for Static).
	Node int
	Why  string
	// Tasks counts the container's tasks that have the preferred node.
	Tasks int
	// Failed counts tasks the kernel refused, by reason.
	Failed map[string]int
	// SkippedTasks counts the tasks left without the preference when the container is
	// skipped after its tasks were listed (MemoryPinnedElsewhere); 0 for the other reasons,
	// whose containers are skipped before any task is read. Only metrics use it.
	SkippedTasks int
	// PlacedAt says how this agent first placed the container (placed.go): PlacedAtStart,
	// PlacedAtAfterStart or PlacedBeforeRestart; "" until a SET of it is confirmed.
	PlacedAt string
}

// Engine applies the desired preferred nodes to the tasks of this host's containers, keeps
// them as tasks come and go, and undoes what it set when a container is no longer selected.
// It keeps what lasts from pass to pass; each pass builds its own state (pass.go).
type Engine struct {
	cfg EngineConfig

	mu sync.Mutex // guards desired, api, starts, apiDown, desiredGen, synced, results, managed
	// desired is what passes act on: api, the last SetDesired's, with the starts it does
	// not hold yet (PlaceAtStart, withStarts).
	desired map[ContainerKey]Desire
	api     map[ContainerKey]Desire
	starts  map[ContainerKey]startDesire
	// apiDown is set while the API server does not answer (SetAPIReachable): no start
	// lapses then.
	apiDown bool
	// desiredGen counts the changes of desired; savedGen (under passMu) is the one on disk.
	desiredGen, savedGen uint64
	synced               bool
	results              map[ContainerKey]ContainerResult
	// managed is the listing of the last pass, published for Managed (view.go); it is
	// never modified once published.
	managed map[ContainerKey]containerListing

	changes chan struct{}
	kick    chan struct{}
	retries chan forkRetry // fork passes to run again (retryUnlisted)
	markDue chan struct{}  // a reading for the fork filter's mark is due (armForkMark)
	// ledgerRetry is set while a pass is scheduled to retry a failed ledger write.
	ledgerRetry atomic.Bool
	// draining is set by Drain: from then on the engine places nothing.
	draining atomic.Bool
	// lostForks is set when fork events were lost since the last full pass (verifyStarts).
	lostForks atomic.Bool
	bootID    string // the kernel's boot id, "" if unknown; the ledger records it
	// maxPIDFDs bounds the pidfds a pass holds at once (bracket.go).
	maxPIDFDs int

	passMu      sync.Mutex // one pass at a time; guards the fields below
	ledger      ledger
	ledgerDirty bool                 // changed since the last write
	journal     ledgerJournal        // the ledger's files (ledgerwrite.go)
	tgids       map[int]ContainerKey // process → container, from the last listing
	listing     map[ContainerKey]containerListing
	// forkSets holds when fork passes set tasks other than the one their event named:
	// tasks whose own fork event is still queued. Cleared by full passes.
	forkSets map[int]setMark
	// topo is the host's online nodes and CPUs as a full pass last read them, at topoRead
	// for desire generation topoGen (topologyDue).
	topo     topology
	topoRead time.Time
	topoGen  uint64
	// choices are the sticky choices of Spread and MostFreeMemory; resolved is every
	// automatic container's node as the last full pass chose it (placement.go).
	choices  map[choiceKey]choice
	resolved map[ContainerKey]resolution
	// forkWatch is what the kernel's filter of fork events holds.
	forkWatch forkWatch
	// placedAt says how each container was first placed (placed.go); bootAtStart is
	// CLOCK_BOOTTIME when the engine was made (bootAtStartOK false: unreadable).
	placedAt      map[ContainerKey]string
	bootAtStart   uint64
	bootAtStartOK bool
}

// containerListing is the cgroup and tasks a pass found for a container it acted on.
type containerListing struct {
	cgroup *cgroups.Container
	tasks  []cgroups.TaskRef
}

// NewEngine makes an engine and loads its ledger. A damaged ledger is not fatal: the error
// is returned beside a working engine so the caller can report it.
func NewEngine(cfg EngineConfig) (*Engine, error) {
	if cfg.RescanInterval <= 0 {
		cfg.RescanInterval = 10 * time.Second
	}
	if cfg.ForkRetryDelays == nil {
		cfg.ForkRetryDelays = DefaultForkRetryDelays
	}
	if cfg.StartGrace <= 0 {
		cfg.StartGrace = DefaultStartGrace
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
	if cfg.ledgerLimit <= 0 {
		cfg.ledgerLimit = defaultLedgerLimit
	}
	if cfg.journalCompactAt <= 0 {
		cfg.journalCompactAt = journalCompactMin
	}
	cfg.MaxTasksPerContainer = taskShare(cfg.MaxTasksPerContainer, cfg.ledgerLimit)
	if cfg.handles == nil {
		cfg.handles = openPIDFD
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
	cfg.Metrics.reportKernel(cfg.Support.Backend, cfg.Support.Supported)
	e := &Engine{
		cfg:      cfg,
		topo:     newTopology(cfg.OnlineNodes, cfg.CPUNode),
		desired:  make(map[ContainerKey]Desire),
		api:      make(map[ContainerKey]Desire),
		starts:   make(map[ContainerKey]startDesire),
		results:  make(map[ContainerKey]ContainerResult),
		changes:  make(chan struct{}, 1),
		kick:     make(chan struct{}, 1),
		retries:  make(chan forkRetry, 64),
		markDue:  make(chan struct{}, 1),
		tgids:    make(map[int]ContainerKey),
		listing:  make(map[ContainerKey]containerListing),
		forkSets: make(map[int]setMark),
		resolved: make(map[ContainerKey]resolution),
		// The pidfds of a pass take at most half the open files the process may have.
		maxPIDFDs: pidfdBound(),
	}
	cfg.Metrics.reportBalancing(cfg.ProcRoot)
	e.bootID, _ = numa.ReadBootID(cfg.ProcRoot) // "" where the kernel has none
	c, cerr := loadChoices(cfg.ChoicesPath)
	e.choices = c
	lerr := e.loadState()
	e.placedAt = placedBeforeRestart(e.ledger)
	e.bootAtStart, e.bootAtStartOK = cfg.Boottime()
	return e, errors.Join(lerr, cerr, e.loadDesired())
}

// SetDesired replaces the whole desired state of this host (but for the starts it does not
// hold yet: PlaceAtStart). The first call marks the engine synced: before it the engine
// does nothing, so a restarted agent never undoes work whose desire it simply has not read
// yet. A desired state persisted by the last run (DesiredPath) counts as a first call; the
// live one replaces it.
func (e *Engine) SetDesired(ds []Desire) {
	m := make(map[ContainerKey]Desire, len(ds))
	for _, d := range ds {
		m[d.Key()] = d
	}
	e.mu.Lock()
	if e.draining.Load() {
		e.mu.Unlock()
		return // Drain emptied the desire for good
	}
	e.api = m
	changed := e.mergeStarts() || !e.synced
	e.synced = true
	e.mu.Unlock()
	if changed {
		signal(e.kick)
	}
}

func desireEqual(a, b Desire) bool { return a == b }

// Results returns a copy of the last pass's results.
func (e *Engine) Results() map[ContainerKey]ContainerResult {
	e.mu.Lock()
	defer e.mu.Unlock()
	return maps.Clone(e.results)
}

// Changes delivers a signal after a pass whose results differ from the previous ones.
func (e *Engine) Changes() <-chan struct{} { return e.changes }

// Start runs the apply loop until ctx ends: a pass when the desired state changes, on every
// rescan tick, and for one container when one of its processes forks.
func (e *Engine) Start(ctx context.Context) error {
	tick := e.cfg.Clock.NewTicker(e.cfg.RescanInterval)
	defer tick.Stop()
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
		case <-e.markDue:
			e.markForks()
		case r := <-e.retries:
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
	e.mu.Lock()
	e.draining.Store(true) // under mu: no SetDesired lands after the empty desire
	if len(e.desired) > 0 || !e.synced {
		e.desired, e.api, e.synced = map[ContainerKey]Desire{}, map[ContainerKey]Desire{}, true
		e.desiredGen++
	}
	clear(e.starts)
	e.mu.Unlock()
	e.fullPass()
	e.passMu.Lock()
	defer e.passMu.Unlock()
	return len(e.ledger)
}

// signal wakes c's reader unless a wake-up is already pending.
func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

package nodeagent

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/utils/clock"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
	"github.com/numapref/numapref/internal/fsutil"
	"github.com/numapref/numapref/internal/nodeagent/cgroups"
	"github.com/numapref/numapref/internal/numa"
)

// cgroupResolver finds a container's cgroup and lists its tasks.
type cgroupResolver interface {
	Resolve(ref cgroups.ContainerRef) (*cgroups.Container, error)
	ListTIDs(c *cgroups.Container) ([]cgroups.TaskRef, error)
	ThreadIDs(c *cgroups.Container) ([]int, error) // membership checks around SETs
	Cpuset(c *cgroups.Container) (cgroups.Cpuset, error)
	ProcRoot() string
}

// EngineConfig wires an Engine to the host.
type EngineConfig struct {
	Resolver cgroupResolver
	Kernel   numa.PreferredNode
	// Support says whether Kernel may be called at all; when not, nothing is applied and
	// every container reports KernelUnsupported.
	Support numa.Support
	// OnlineNodes are the NUMA nodes this host has online.
	OnlineNodes []int
	// LedgerPath is the file that remembers what the agent set, across restarts.
	LedgerPath string
	// RescanInterval is how often every container is checked again (forks reset the
	// preference of the child, so new processes must be caught).
	RescanInterval time.Duration
	// ProcEvents, when not nil, delivers fork events so new tasks are handled at once.
	ProcEvents <-chan numa.ProcEvent
	// ForkRetryDelays are the looks a fork pass takes again when it did not list the new
	// task (see DefaultForkRetryDelays); nil means the default.
	ForkRetryDelays []time.Duration
	// Metrics receives the engine's measurements; nil makes unregistered ones.
	Metrics *Metrics
	// Clock runs the rescan ticker and the fork retries' timers, and times passes and
	// fork events' arrivals; nil means the real clock. (The fork-lag metric also reads the
	// kernel's CLOCK_MONOTONIC, which the proc connector stamps events with: no Clock
	// stands for that one.)
	Clock clock.WithTickerAndDelayedExecution
	Log   logr.Logger

	// ledgerLimit bounds the ledger file (default defaultLedgerLimit); tests make it small.
	ledgerLimit int
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
	// Tasks counts the container's tasks that have the preferred node.
	Tasks int
	// Failed counts tasks the kernel refused, by reason.
	Failed map[string]int
	// Skipped counts the tasks left without the preference when the container is skipped
	// after its tasks were listed (MemoryPinnedElsewhere); 0 for the other reasons, whose
	// containers are skipped before any task is read. Only metrics use it.
	Skipped int
}

// Engine applies the desired preferred nodes to the tasks of this host's containers, keeps
// them as tasks come and go, and undoes what it set when a container is no longer selected.
type Engine struct {
	cfg    EngineConfig
	online map[int]bool

	mu      sync.Mutex // guards desired, synced, results, managed
	desired map[ContainerKey]Desire
	synced  bool
	results map[ContainerKey]ContainerResult
	// managed is the listing of the last pass, published for Managed (view.go); it is
	// never modified once published.
	managed map[ContainerKey]containerListing

	changes chan struct{}
	kick    chan struct{}
	retries chan forkRetry // fork passes to run again (retryUnlisted)
	// ledgerRetry is set while a pass is scheduled to retry a failed ledger write.
	ledgerRetry atomic.Bool
	bootID      string // the kernel's boot id, "" if unknown; the ledger records it

	passMu      sync.Mutex // one pass at a time; guards the fields below
	ledger      ledger
	ledgerDirty bool                 // changed since the last write
	tgids       map[int]ContainerKey // process → container, from the last listing
	listing     map[ContainerKey]containerListing
	// forkSets holds when fork passes set tasks other than the one their event named:
	// tasks whose own fork event is still queued. Cleared by full passes.
	forkSets map[int]setMark
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
	if cfg.Metrics == nil {
		cfg.Metrics = NewMetrics()
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.ledgerLimit <= 0 {
		cfg.ledgerLimit = defaultLedgerLimit
	}
	if cfg.handles == nil {
		cfg.handles = openPIDFD
	}
	cfg.Metrics.reportKernel(cfg.Support.Backend, cfg.Support.Supported)
	e := &Engine{
		cfg:      cfg,
		online:   make(map[int]bool),
		desired:  make(map[ContainerKey]Desire),
		results:  make(map[ContainerKey]ContainerResult),
		changes:  make(chan struct{}, 1),
		kick:     make(chan struct{}, 1),
		retries:  make(chan forkRetry, 64),
		tgids:    make(map[int]ContainerKey),
		listing:  make(map[ContainerKey]containerListing),
		forkSets: make(map[int]setMark),
	}
	for _, n := range cfg.OnlineNodes {
		e.online[n] = true
	}
	if cfg.Resolver != nil {
		cfg.Metrics.reportBalancing(cfg.Resolver.ProcRoot())
		e.bootID, _ = numa.ReadBootID(cfg.Resolver.ProcRoot()) // "" where the kernel has none
	}
	return e, e.loadState()
}

// loadState reads the ledger, first removing what a write killed mid-way left beside it.
// A ledger of another boot names no living task: it is dropped, and nothing is undone
// from it.
func (e *Engine) loadState() error {
	e.ledger = ledger{}
	if e.cfg.LedgerPath == "" {
		return nil
	}
	if n, err := fsutil.RemoveStaleTemps(e.cfg.LedgerPath); err != nil {
		e.cfg.Log.Error(err, "Removing stale temporary files of the ledger")
	} else if n > 0 {
		e.cfg.Log.Info("Removed temporary files a killed ledger write left", "files", n)
	}
	f, err := loadLedger(e.cfg.LedgerPath, e.cfg.ledgerLimit)
	if f.BootID != "" && e.bootID != "" && f.BootID != e.bootID {
		e.cfg.Log.Info("The ledger was written before the host rebooted: its tasks are gone, dropping it",
			"ledgerBootID", f.BootID, "bootID", e.bootID, "containers", len(f.Containers))
		e.ledgerDirty = true
		return err
	}
	e.ledger = f.ledger()
	return err
}

// SetDesired replaces the whole desired state of this host. The first call marks the engine
// synced: before it the engine does nothing, so a restarted agent never undoes work whose
// desire it simply has not read yet.
func (e *Engine) SetDesired(ds []Desire) {
	m := make(map[ContainerKey]Desire, len(ds))
	for _, d := range ds {
		m[d.Key()] = d
	}
	e.mu.Lock()
	changed := !e.synced || !maps.EqualFunc(m, e.desired, desireEqual)
	e.desired, e.synced = m, true
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
		case r := <-e.retries:
			e.pass(map[ContainerKey]bool{r.key: true}, r.fork)
			e.retryUnlisted(r.key, r.fork, r.attempt)
		}
	}
}

// NeedLeaderElection is false: every node's agent works on its own node.
func (e *Engine) NeedLeaderElection() bool { return false }

// Pass checks every desired container once and undoes what is no longer desired.
func (e *Engine) Pass() { e.pass(nil, nil) }

// pass runs over the containers in only, or over all and undoes orphans when only is nil.
// fork, when not nil, is the fork event the pass runs for.
func (e *Engine) pass(only map[ContainerKey]bool, fork *forkMark) {
	e.passMu.Lock()
	defer e.passMu.Unlock()
	start := e.cfg.Clock.Now()

	e.mu.Lock()
	if !e.synced {
		e.mu.Unlock()
		return
	}
	desired := e.desired
	results := maps.Clone(e.results)
	e.mu.Unlock()

	var sets []pendingSet
	defer func() { closeSets(sets) }()
	dirty := false
	if only == nil {
		results = make(map[ContainerKey]ContainerResult, len(desired))
		e.tgids = make(map[int]ContainerKey)
		e.listing = make(map[ContainerKey]containerListing, len(desired))
		clear(e.forkSets)
	} else {
		e.listing = maps.Clone(e.listing) // the previous one is published
	}
	for key, d := range desired {
		if only != nil && !only[key] {
			continue
		}
		r, s, changed := e.planContainer(key, d, e.trusted(key, d, results, fork))
		results[key] = r
		sets = append(sets, s...)
		dirty = dirty || changed
	}
	if only == nil {
		for key := range e.ledger {
			if d, ok := desired[key]; !ok || d.Skip != "" {
				dirty = e.undo(key) || dirty
			}
		}
	}
	// The ledger must name a value before the value is set (write-ahead). Every other
	// change (tasks that inherited the value, tasks gone, outcomes of the SETs) waits for
	// the next full pass: undo also restores inherited tasks and skips gone ones, so a
	// crash before then loses nothing, and a fork costs one ledger write, not three.
	// A pass whose write ahead fails issues none of its SETs: a value set without its
	// ledger entry could not be undone after a crash.
	e.ledgerDirty = e.ledgerDirty || dirty
	saved := true
	if len(sets) > 0 {
		if err := e.saveLedger(); err != nil {
			saved = false
			e.ledgerFailed(err)
			skipUnrecorded(sets, results, err)
		} else {
			if e.cfg.hooks.afterWriteAhead != nil {
				e.cfg.hooks.afterWriteAhead()
			}
			e.applySets(sets, results, fork)
		}
		e.ledgerDirty = true
	}
	if saved && only == nil && e.ledgerDirty {
		if err := e.saveLedger(); err != nil {
			e.ledgerFailed(err)
		} else {
			e.ledgerDirty = false
		}
	}

	e.mu.Lock()
	changed := !maps.EqualFunc(results, e.results, resultEqual)
	e.results = results
	e.managed = e.listing
	e.mu.Unlock()
	if changed {
		signal(e.changes)
	}
	kind := "fork"
	if only == nil {
		kind = "full"
		e.cfg.Metrics.reportResults(results)
		e.cfg.Metrics.reportBalancing(e.cfg.Resolver.ProcRoot())
	}
	e.cfg.Metrics.reportPass(kind, e.cfg.Clock.Since(start))
}

// ledgerRetryDelay is how soon a pass runs again after a failed ledger write (a disk
// that filled up or went read-only), unless a rescan comes first.
const ledgerRetryDelay = time.Second

// ledgerFailed counts and logs a failed ledger write and schedules a pass to retry it.
func (e *Engine) ledgerFailed(err error) {
	e.cfg.Metrics.reportLedgerError()
	e.cfg.Log.Error(err, "Writing the ledger; SETs wait until it can be written", "retryIn", ledgerRetryDelay)
	if e.ledgerRetry.CompareAndSwap(false, true) {
		e.cfg.Clock.AfterFunc(min(ledgerRetryDelay, e.cfg.RescanInterval), func() {
			e.ledgerRetry.Store(false)
			signal(e.kick)
		})
	}
}

// skipUnrecorded reports the containers of sets, none of which was issued because the
// ledger could not be written first, as LedgerError.
func skipUnrecorded(sets []pendingSet, results map[ContainerKey]ContainerResult, err error) {
	skipped := map[ContainerKey]int{}
	for _, s := range sets {
		skipped[s.key]++
	}
	for key, n := range skipped {
		r := results[key]
		r.Reason = numav1.ReasonLedgerError
		r.Message = fmt.Sprintf("%d tasks have NUMA node %d; %d others were not set: the agent records every value "+
			"in its ledger before setting it, so it can undo it after a crash, and the ledger could not be written (%v)",
			r.Tasks, r.Desire.Node, n, err)
		results[key] = r
	}
}

// resultEqual reports whether two results would publish the same state (Skipped, only
// for metrics, aside).
func resultEqual(a, b ContainerResult) bool {
	return a.Desire == b.Desire && a.Reason == b.Reason && a.Message == b.Message &&
		a.Tasks == b.Tasks && maps.Equal(a.Failed, b.Failed)
}

// signal wakes c's reader unless a wake-up is already pending.
func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

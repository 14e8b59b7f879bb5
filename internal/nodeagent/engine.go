package nodeagent

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"golang.org/x/sys/unix"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
	"github.com/numapref/numapref/internal/nodeagent/cgroups"
	"github.com/numapref/numapref/internal/numa"
)

// cgroupResolver finds a container's cgroup and lists its tasks.
type cgroupResolver interface {
	Resolve(ref cgroups.ContainerRef) (*cgroups.Container, error)
	ListTIDs(c *cgroups.Container) ([]cgroups.TaskRef, error)
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
	Log     logr.Logger
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

// forkMark is the fork event a one-container pass runs for.
type forkMark struct {
	tid      int
	kernelNs uint64 // the event's kernel timestamp (CLOCK_MONOTONIC), 0 if none
	arrival  time.Time
}

// setMark is when a SET returned, on CLOCK_MONOTONIC (0 if unreadable) and the wall clock.
type setMark struct {
	mono uint64
	at   time.Time
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
	}
	l, err := loadLedger(cfg.LedgerPath)
	e.ledger = l
	return e, err
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
	tick := time.NewTicker(e.cfg.RescanInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-e.kick:
			e.Pass()
		case <-tick.C:
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

func (e *Engine) onProcEvent(ev numa.ProcEvent) {
	arrival := time.Now()
	if ev.Kind == numa.ProcEventLost {
		e.Pass() // the socket overflowed: any fork may be among the lost events
		return
	}
	if ev.Kind != numa.ProcEventFork {
		return
	}
	// A new thread's event names its process as child TGID (and the process's parent as
	// parent: threads share real_parent); a new process's names its creator as parent.
	fork := &forkMark{tid: ev.ChildTID, kernelNs: ev.TimestampNs, arrival: arrival}
	e.passMu.Lock()
	key, ok := e.tgids[ev.ChildTGID]
	if !ok {
		key, ok = e.tgids[ev.ParentTGID]
	}
	if set, done := e.forkSets[ev.ChildTID]; done {
		// An earlier event's pass listed and set this task before its own event came.
		delete(e.forkSets, ev.ChildTID)
		e.cfg.Metrics.reportForkLag(fork, set, false)
	}
	e.passMu.Unlock()
	if ok {
		e.pass(map[ContainerKey]bool{key: true}, fork)
		e.retryUnlisted(key, fork, 0)
	}
}

// DefaultForkRetryDelays are the looks a fork pass takes again when it did not list the new task.
// The kernel sends the fork event just before it moves the child into its cgroup
// (copy_process: proc_fork_connector, then cgroup_post_fork), so a pass in that gap sees
// the child in its parent's old cgroup or the root. Measured in the kernel lab: 8 in 1800
// forks on a stalled vCPU, 0 in 400 on this host. After the last look the rescan catches it.
var DefaultForkRetryDelays = []time.Duration{time.Millisecond, 10 * time.Millisecond}

// forkRetry is a one-container pass to run again for a fork event.
type forkRetry struct {
	key     ContainerKey
	fork    *forkMark
	attempt int
}

// retryUnlisted schedules look number attempt for the fork's task unless the last pass
// listed it. The look runs on the apply loop (Start), so it ends with it.
func (e *Engine) retryUnlisted(key ContainerKey, fork *forkMark, attempt int) {
	if attempt >= len(e.cfg.ForkRetryDelays) || e.listed(key, fork.tid) {
		return
	}
	time.AfterFunc(e.cfg.ForkRetryDelays[attempt], func() {
		select {
		case e.retries <- forkRetry{key: key, fork: fork, attempt: attempt + 1}:
		default: // a burst filled the queue: the rescan catches the rest
		}
	})
}

// listed reports whether the container's last listing holds the task.
func (e *Engine) listed(key ContainerKey, tid int) bool {
	e.passMu.Lock()
	defer e.passMu.Unlock()
	for _, t := range e.listing[key].tasks {
		if t.TID == tid {
			return true
		}
	}
	return false
}

// Pass checks every desired container once and undoes what is no longer desired.
func (e *Engine) Pass() { e.pass(nil, nil) }

// pendingSet is a kernel SET the pass decided on.
type pendingSet struct {
	key  ContainerKey
	tid  int
	node int
}

// pass runs over the containers in only, or over all and undoes orphans when only is nil.
// fork, when not nil, is the fork event the pass runs for.
func (e *Engine) pass(only map[ContainerKey]bool, fork *forkMark) {
	e.passMu.Lock()
	defer e.passMu.Unlock()
	start := time.Now()

	e.mu.Lock()
	if !e.synced {
		e.mu.Unlock()
		return
	}
	desired := e.desired
	results := maps.Clone(e.results)
	e.mu.Unlock()

	var sets []pendingSet
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
	e.ledgerDirty = e.ledgerDirty || dirty
	if len(sets) > 0 {
		e.saveLedger()
		e.applySets(sets, results, fork)
		e.ledgerDirty = true
	}
	if only == nil && e.ledgerDirty {
		e.saveLedger()
		e.ledgerDirty = false
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
	e.cfg.Metrics.reportPass(kind, time.Since(start))
}

// planContainer reads the kernel state of one container's tasks and decides which tasks
// need a SET. New tasks get ledger entries here, before any SET is issued.
// trusted lists, for a fork pass, the tasks the container's previous pass listed and
// applied without a failure: the fork concerns new tasks, so those are not read again (a
// GET per task, most of a fork pass's cost on the emulator); the next full pass checks
// every task. A full pass, or a container whose desire or outcome changed, trusts nothing.
func (e *Engine) trusted(key ContainerKey, d Desire, results map[ContainerKey]ContainerResult, fork *forkMark) map[int]bool {
	prev, ok := results[key]
	if fork == nil || !ok || prev.Desire != d || prev.Reason != numav1.ReasonApplied || len(prev.Failed) > 0 {
		return nil
	}
	tasks := e.listing[key].tasks
	trust := make(map[int]bool, len(tasks))
	for _, t := range tasks {
		trust[t.TID] = true
	}
	// The event's own task is new even when its tid was listed before: a recycled pid.
	delete(trust, fork.tid)
	return trust
}

func (e *Engine) planContainer(key ContainerKey, d Desire, trust map[int]bool) (ContainerResult, []pendingSet, bool) {
	r := ContainerResult{Desire: d}
	// skip reports why the container gets nothing; the values set before are undone, except
	// when the host could not be read (a passing cgroup error must not churn the tasks).
	skip := func(reason, msg string) (ContainerResult, []pendingSet, bool) {
		r.Reason, r.Message = reason, msg
		delete(e.listing, key)
		if reason == numav1.ReasonCgroupError {
			return r, nil, false
		}
		return r, nil, e.undo(key)
	}
	switch {
	case d.Skip != "":
		return skip(d.Skip, d.Message)
	case !e.cfg.Support.Supported:
		return skip(numav1.ReasonKernelUnsupported, "this kernel cannot set a preferred NUMA node: "+e.cfg.Support.Reason)
	case !e.online[d.Node]:
		return skip(numav1.ReasonNodeNotPresent, fmt.Sprintf("NUMA node %d is not online on this host (online: %s)", d.Node, numa.FormatList(e.cfg.OnlineNodes)))
	}
	cg, err := e.cfg.Resolver.Resolve(d.Ref)
	if err != nil {
		return skip(cgroupReason(err), err.Error())
	}
	cs, err := e.cfg.Resolver.Cpuset(cg)
	if err != nil {
		return skip(cgroupReason(err), err.Error())
	}
	if len(cs.Mems) > 0 && !slices.Contains(cs.Mems, d.Node) {
		if tids, err := e.cfg.Resolver.ListTIDs(cg); err == nil {
			r.Skipped = len(tids) // for metrics only: a cgroup read, no kernel call
		}
		return skip(numav1.ReasonMemoryPinnedElsewhere, fmt.Sprintf("cpuset.mems of the container is %s; NUMA node %d would fight it", numa.FormatList(cs.Mems), d.Node))
	}
	tids, err := e.cfg.Resolver.ListTIDs(cg)
	if err != nil {
		return skip(cgroupReason(err), err.Error())
	}
	e.listing[key] = containerListing{cgroup: cg, tasks: tids}

	entry := e.ledger[key]
	changed := false
	if entry == nil {
		entry = &containerEntry{PodUID: string(key.PodUID), Container: key.Container, Tasks: map[int]*taskEntry{}}
	}
	if entry.Ref != d.Ref {
		// New, or the container restarted under a new ID: undo must find this cgroup.
		entry.Ref = d.Ref
		changed = true
	}
	listed := make(map[int]bool, len(tids))
	var sets []pendingSet
	r.Failed = map[string]int{}
	for _, t := range tids {
		listed[t.TID] = true
		e.tgids[t.TGID] = key
		if trust[t.TID] && entry.Tasks[t.TID] != nil {
			r.Tasks++ // applied by the last pass (see trusted)
			continue
		}
		v, err := e.cfg.Kernel.Get(t.TID)
		if err != nil {
			countFailure(r.Failed, err)
			continue
		}
		known := entry.Tasks[t.TID]
		if v == d.Node && known != nil {
			r.Tasks++
			continue
		}
		// A task the ledger does not know, or whose value is not ours: read its identity
		// (only here, not for every known task on every pass) before acting.
		task, err := numa.ReadTask(e.cfg.Resolver.ProcRoot(), t.TID)
		if err != nil {
			continue // exited since listing
		}
		if known != nil && known.task(t.TID) != task {
			known = nil // the pid was recycled: a different task
		}
		if known == nil {
			known = &taskEntry{Start: task.StartTime, Prev: v}
			if v == d.Node {
				known.Prev = -1 // inherited from a thread or CLONE_VM parent the agent set
			}
			entry.Tasks[t.TID] = known
			changed = true
		}
		if v == d.Node {
			known.Values = []int{d.Node}
			r.Tasks++
			continue
		}
		if !slices.Contains(known.Values, d.Node) {
			known.Values = append(known.Values, d.Node)
			changed = true
		}
		sets = append(sets, pendingSet{key: key, tid: t.TID, node: d.Node})
	}
	for tid := range entry.Tasks {
		if !listed[tid] {
			delete(entry.Tasks, tid) // exited, or moved out of the container: never touched again
			changed = true
		}
	}
	e.ledger[key] = entry
	r.Reason = numav1.ReasonApplied
	return r, sets, changed
}

// applySets issues the planned SETs and settles the ledger with their outcome. fork, when
// not nil, is the fork event the pass runs for: the SET of its new task reports the lag.
func (e *Engine) applySets(sets []pendingSet, results map[ContainerKey]ContainerResult, fork *forkMark) {
	for _, s := range sets {
		r := results[s.key]
		t := e.ledger[s.key].Tasks[s.tid]
		err := e.cfg.Kernel.Set(s.tid, s.node)
		switch {
		case err == nil:
			t.Values = []int{s.node}
			r.Tasks++
			e.cfg.Metrics.reportSet(numav1.ReasonApplied)
			if fork != nil {
				e.noteForkSet(fork, s.tid)
			}
		case errors.Is(err, unix.ESRCH):
			delete(e.ledger[s.key].Tasks, s.tid) // exited before the SET
		default:
			t.Values = slices.DeleteFunc(t.Values, func(v int) bool { return v == s.node })
			e.cfg.Metrics.reportSet(countFailure(r.Failed, err))
		}
		results[s.key] = r
	}
	for key, r := range results {
		if r.Reason == numav1.ReasonApplied && len(r.Failed) > 0 {
			r.Reason = worstFailure(r.Failed)
			r.Message = fmt.Sprintf("%d tasks have NUMA node %d; the kernel refused %v", r.Tasks, r.Desire.Node, r.Failed)
			results[key] = r
		}
	}
}

// noteForkSet reports the fork-to-SET lag of tid, just set by the pass for fork's event:
// now when the event named tid, else when tid's own event comes.
func (e *Engine) noteForkSet(fork *forkMark, tid int) {
	set := setMark{at: time.Now()}
	set.mono, _ = monotonicNs()
	if tid == fork.tid {
		e.cfg.Metrics.reportForkLag(fork, set, true)
		return
	}
	e.forkSets[tid] = set
}

// undo restores, in the container's tasks, every value the agent set that is still there,
// and forgets the container. It reports whether the ledger changed.
func (e *Engine) undo(key ContainerKey) bool {
	entry := e.ledger[key]
	if entry == nil {
		return false
	}
	if !e.cfg.Support.Supported {
		return false // cannot read the kernel: keep the entry for a kernel that can
	}
	cg, err := e.cfg.Resolver.Resolve(entry.ref())
	if errors.Is(err, cgroups.ErrContainerNotFound) {
		delete(e.ledger, key) // the cgroup is gone, and its tasks with it
		return true
	}
	if err != nil {
		e.cfg.Log.Error(err, "Resolving container to undo", "container", key.String())
		return false
	}
	var ours []int
	for _, te := range entry.Tasks {
		ours = append(ours, te.Values...)
	}
	// A task still holding the agent's value may create a thread while undo runs; the
	// thread inherits the value. So list again after restoring, until a listing shows no
	// task undo has not seen; if the container keeps growing, the entry stays for the next
	// pass instead of being forgotten with forced tasks in it.
	seen := map[int]bool{}
	remaining := map[int]*taskEntry{}
	const maxRounds = 4
	for round := 0; ; round++ {
		tids, err := e.cfg.Resolver.ListTIDs(cg)
		if errors.Is(err, cgroups.ErrContainerNotFound) {
			delete(e.ledger, key)
			return true
		}
		if err != nil {
			e.cfg.Log.Error(err, "Listing tasks to undo", "container", key.String())
			return false
		}
		fresh := 0
		for _, t := range tids {
			if seen[t.TID] {
				continue
			}
			seen[t.TID] = true
			fresh++
			if te, err := e.restoreListed(key, entry, t.TID, ours); err != nil {
				remaining[t.TID] = te // kept to retry
			}
		}
		if fresh == 0 {
			break
		}
		if round == maxRounds {
			e.cfg.Log.Info("Container keeps creating tasks during undo; finishing next pass", "container", key.String())
			return true
		}
	}
	if len(remaining) > 0 {
		entry.Tasks = remaining
		return true
	}
	delete(e.ledger, key)
	return true
}

// restoreListed restores one listed task of a container being undone. A task the ledger
// does not know was born since the last pass: a thread or CLONE_VM child that inherited
// the value from a task the agent set; it is restored too, or it would keep the value.
func (e *Engine) restoreListed(key ContainerKey, entry *containerEntry, tid int, ours []int) (*taskEntry, error) {
	te := entry.Tasks[tid]
	if te == nil {
		task, err := numa.ReadTask(e.cfg.Resolver.ProcRoot(), tid)
		if err != nil {
			return nil, nil // gone
		}
		te = &taskEntry{Start: task.StartTime, Prev: numa.NoNode, Values: ours}
	}
	err := e.restore(tid, te)
	if err != nil {
		e.cfg.Log.Error(err, "Undoing preferred node", "container", key.String(), "tid", tid)
	}
	return te, err
}

// restore puts back the value a task had before the agent set it, when the task is the
// same one (start time) and still has a value the agent set.
func (e *Engine) restore(tid int, te *taskEntry) error {
	if err := te.task(tid).Verify(e.cfg.Resolver.ProcRoot()); err != nil {
		return nil // gone or recycled: not ours any more
	}
	v, err := e.cfg.Kernel.Get(tid)
	if errors.Is(err, unix.ESRCH) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading preferred node of task %d: %w", tid, err)
	}
	if !slices.Contains(te.Values, v) {
		return nil // the application chose its own value since: leave it
	}
	if err := e.cfg.Kernel.Set(tid, te.Prev); err != nil && !errors.Is(err, unix.ESRCH) {
		return fmt.Errorf("restoring preferred node %d of task %d: %w", te.Prev, tid, err)
	}
	e.cfg.Metrics.reportRestore()
	return nil
}

func (e *Engine) saveLedger() {
	if e.cfg.LedgerPath == "" {
		return
	}
	if err := e.ledger.save(e.cfg.LedgerPath); err != nil {
		e.cfg.Log.Error(err, "Saving ledger")
	}
}

func cgroupReason(err error) string {
	if errors.Is(err, cgroups.ErrContainerNotFound) {
		return numav1.ReasonContainerNotFound
	}
	return numav1.ReasonCgroupError
}

// countFailure counts a refused call by reason and returns the reason ("" for a task
// that exited since listing: normal, not a failure).
func countFailure(failed map[string]int, err error) string {
	reason := numav1.ReasonKernelError
	switch {
	case errors.Is(err, unix.ESRCH):
		return ""
	case errors.Is(err, unix.EPERM), errors.Is(err, unix.EACCES):
		reason = numav1.ReasonPermissionDenied
	}
	failed[reason]++
	return reason
}

func worstFailure(failed map[string]int) string {
	if failed[numav1.ReasonPermissionDenied] > 0 {
		return numav1.ReasonPermissionDenied
	}
	return numav1.ReasonKernelError
}

func resultEqual(a, b ContainerResult) bool {
	return a.Desire == b.Desire && a.Reason == b.Reason && a.Message == b.Message &&
		a.Tasks == b.Tasks && maps.Equal(a.Failed, b.Failed)
}

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

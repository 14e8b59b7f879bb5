package nodeagent

import (
	"fmt"
	"maps"
	"time"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
)

// A pass is a value: each builds its own state (the desire it acts on, its results and
// listings, a cache of the cgroups it read), plans (plan.go: reads only, decides what to
// SET and what to undo), then applies the plan in one step (apply.go: the ledger written
// ahead, the SETs bracketed, the undos). A full pass checks every desired container and
// undoes the rest; a fork pass checks the one container a fork event names.

// pass is the state of one pass.
type pass struct {
	fork *forkMark // the fork event of a fork pass; nil for a full or start pass
	// atStart marks a start pass: one container at its start (PlaceAtStart), every task
	// of it new.
	atStart bool
	desired map[ContainerKey]Desire
	gen     uint64 // desired's generation
	results map[ContainerKey]ContainerResult
	listing map[ContainerKey]containerListing
	tgids   map[int]ContainerKey
	ids     *identifier // the pidfds the pass holds
	start   time.Time
}

// kind is the pass's label in the pass-duration metric.
func (p *pass) kind() string {
	switch {
	case p.atStart:
		return "start"
	case p.fork == nil:
		return "full"
	}
	return "fork"
}

// full says whether the pass checks every container.
func (p *pass) full() bool { return p.fork == nil && !p.atStart }

// newPass snapshots the desire; ok is false before the engine is synced (nothing to do).
// A fork pass has fork's event, a start pass atStart; a full pass neither.
func (e *Engine) newPass(fork *forkMark, atStart bool) (p *pass, ok bool) {
	p = &pass{fork: fork, atStart: atStart, start: e.cfg.Clock.Now(), ids: e.newIdentifier()}
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.synced {
		return nil, false
	}
	if p.full() {
		e.mergeStarts() // starts past their grace end here when no SetDesired comes
	}
	p.desired, p.gen = e.desired, e.desiredGen
	if p.full() {
		p.results = make(map[ContainerKey]ContainerResult, len(e.desired))
		p.listing = make(map[ContainerKey]containerListing, len(e.desired))
		p.tgids = make(map[int]ContainerKey)
	} else {
		p.results = maps.Clone(e.results)
		p.listing = maps.Clone(e.listing) // the previous one is published
		p.tgids = e.tgids
	}
	return p, true
}

// fullPass checks every desired container once and undoes what is no longer desired.
func (e *Engine) fullPass() {
	e.passMu.Lock()
	defer e.passMu.Unlock()
	p, ok := e.newPass(nil, false)
	if !ok {
		return
	}
	e.persistDesired(p.desired, p.gen)
	e.readTopology(p.gen)
	clear(e.forkSets)
	pl := e.planner(p, nil)
	choicesDirty := pl.resolve(p.desired)
	e.resolved = pl.resolved
	e.finish(p, pl.planFull(p.desired), choicesDirty)
	e.compactLedgerPastSize()
}

// forkPass checks the one container key for fork's event: the tasks the last pass applied
// are trusted (see trusted), the new ones read and set.
func (e *Engine) forkPass(key ContainerKey, fork *forkMark) {
	if e.draining.Load() {
		return
	}
	e.passMu.Lock()
	defer e.passMu.Unlock()
	p, ok := e.newPass(fork, false)
	if !ok {
		return
	}
	e.persistDesired(p.desired, p.gen)
	d, ok := p.desired[key]
	if _, chosen := e.resolved[key]; !ok || d.Placement.Automatic() && !chosen {
		return // gone, or new since the last full pass, which is on its way (SetDesired kicks one)
	}
	fork.passStarted(p.start)
	pl := e.planner(p, e.resolved)
	cp := pl.planContainer(key, d, e.trusted(key, d, fork))
	fork.planned = e.cfg.Clock.Now()
	e.finish(p, plan{containers: []containerPlan{cp}}, false)
}

// finish applies the pass's plan, publishes its results and reports its metrics.
func (e *Engine) finish(p *pass, pl plan, choicesDirty bool) {
	defer p.ids.releaseAll()
	if choicesDirty {
		e.saveChoices() // before the SETs: a crash must not reshuffle a running pod
	}
	e.apply(p, pl)
	e.tgids, e.listing = p.tgids, p.listing
	e.filterForks()
	e.mu.Lock()
	changed := !maps.EqualFunc(p.results, e.results, resultEqual)
	e.results = p.results
	e.managed = p.listing
	e.mu.Unlock()
	if changed {
		signal(e.changes)
	}
	if p.full() {
		e.cfg.Metrics.reportResults(p.results)
		e.cfg.Metrics.reportBalancing(e.cfg.ProcRoot)
	}
	e.cfg.Metrics.reportPass(p.kind(), e.cfg.Clock.Since(p.start))
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
			r.Tasks, r.Node, n, err)
		results[key] = r
	}
}

// resultEqual reports whether two results would publish the same state (SkippedTasks,
// only for metrics, aside).
func resultEqual(a, b ContainerResult) bool {
	return a.Desire == b.Desire && a.Reason == b.Reason && a.Message == b.Message &&
		a.Node == b.Node && a.Why == b.Why && a.Tasks == b.Tasks && maps.Equal(a.Failed, b.Failed) &&
		a.PlacedAt == b.PlacedAt
}

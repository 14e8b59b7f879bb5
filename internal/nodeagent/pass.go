// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package nodeagent

import (
	"fmt"
	"maps"
	"slices"
	"time"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
	"github.com/numapref/numapref/internal/nodeagent/cgroups"
	"github.com/numapref/numapref/internal/nodeagent/desire"
	"github.com/numapref/numapref/internal/nodeagent/known"
	"github.com/numapref/numapref/internal/nodeagent/ledger"
	"github.com/numapref/numapref/internal/nodeagent/plan"
)

// A pass is a value: each builds its own state (the desire it acts on, its results and
// listings), plans (package plan: reads only, decides what to SET and what to undo), then
// applies the plan in one step (apply.go: the ledger written ahead, the SETs bracketed, the
// undos). A full pass checks every desired container and undoes the rest; a fork pass
// checks the one container a fork event names; a start pass the one container the runtime
// is starting.

// passKind is what a pass checks.
type passKind int

const (
	passFull  passKind = iota // every desired container, and the undo of the others
	passFork                  // the one container a fork event names
	passStart                 // the one container PlaceAtStart names, every task of it new
)

// String is the kind's label in the pass-duration metric.
func (k passKind) String() string { return [...]string{"full", "fork", "start"}[k] }

// pass is the state of one pass.
type pass struct {
	kind passKind
	fork *forkMark // the fork event of a fork pass; nil for the others
	// known is the ledger the pass plans from, read before its desire: a container the
	// start lane records meanwhile is in the desire then, never an orphan.
	known known.View
	// desired is the desire the pass acts on, of generation gen.
	desired map[desire.ContainerKey]desire.Desire
	gen     uint64
	results map[desire.ContainerKey]plan.Result
	listing map[desire.ContainerKey]plan.Listing
	ids     *plan.Identifier // the pidfds the pass holds
	start   time.Time
}

// newPass snapshots the desire; ok is false before the engine is synced (nothing to do).
// A fork pass has fork's event. The caller holds passMu.
func (e *Engine) newPass(kind passKind, fork *forkMark) (p *pass, ok bool) {
	e.takeLaneNotes(nil, nil)
	p = &pass{kind: kind, fork: fork, start: e.cfg.Clock.Now(),
		ids: plan.NewIdentifier(e.cfg.ProcRoot, e.cfg.handles, e.cfg.maxPIDFDs)}
	p.known = e.ledger.View()
	if e.cfg.hooks.betweenReads != nil {
		e.cfg.hooks.betweenReads(kind)
	}
	p.desired, p.gen, ok = e.desires.forPass(kind == passFull)
	if !ok {
		return nil, false
	}
	if kind == passFull {
		p.results = make(map[desire.ContainerKey]plan.Result, len(p.desired))
		p.listing = make(map[desire.ContainerKey]plan.Listing, len(p.desired))
	} else {
		p.results = e.published.results()
		p.listing = maps.Clone(e.forks.listing) // the previous one is published
	}
	e.persistDesired(p.desired, p.gen)
	return p, true
}

// fullPass checks every desired container once and undoes what is no longer desired.
func (e *Engine) fullPass() {
	e.passMu.Lock()
	defer e.passMu.Unlock()
	p, ok := e.newPass(passFull, nil)
	if !ok {
		return
	}
	e.placements.readTopology(p.gen, e.published.anyNodeNotPresent)
	e.forks.clearSets()
	e.finish(p, plan.Full(e.planInput(p)))
	if err := e.ledger.CompactPastSize(); err != nil {
		e.ledgerFailed(err)
	}
}

// forkPass checks the one container key for fork's event: the tasks the last pass applied
// are trusted (see trusted), the new ones read and set.
func (e *Engine) forkPass(key desire.ContainerKey, fork *forkMark) {
	if e.desires.draining.Load() {
		return
	}
	e.passMu.Lock()
	defer e.passMu.Unlock()
	p, ok := e.newPass(passFork, fork)
	if !ok {
		return
	}
	d, ok := p.desired[key]
	if !ok || d.Placement.Automatic() && !e.placements.resolved.Has(key) {
		return // gone, or new since the last full pass, which is on its way (SetDesired kicks one)
	}
	pl, fromEvent := e.planFromEvent(p, key, d, fork)
	fork.passStarted(p.start)
	if !fromEvent {
		pl = plan.One(e.planInput(p), key, e.trusted(key, d, fork))
	}
	fork.planned = e.cfg.Clock.Now()
	e.finish(p, pl)
}

// planFromEvent plans fork pass p for container key, desired as d, from its event alone
// (plan.Fork) when it may: at the event's first look, for a container whose last pass
// applied every task it listed under the same desire. Else ok is false, and the pass
// lists the container (the event's task not listed yet by a look before, an outcome to
// judge again).
func (e *Engine) planFromEvent(p *pass, key desire.ContainerKey, d desire.Desire, fork *forkMark) (pl plan.Plan, ok bool) {
	last, known := p.results[key]
	listed, listedBefore := e.forks.listing[key]
	if !fork.firstPass.IsZero() || fork.tgid <= 0 || !known || !listedBefore ||
		last.Desire != d || last.Reason != numav1.ReasonApplied || len(last.Failed) > 0 {
		return plan.Plan{}, false
	}
	in := plan.Input{Known: p.known, Kernel: kernelReader{e.cfg.Kernel}, ProcRoot: e.cfg.ProcRoot, Support: e.cfg.Support,
		MaxTasks: e.cfg.MaxTasksPerContainer, IDs: p.ids, ForkTID: fork.tid, Log: e.cfg.Log}
	return plan.Fork(in, key, last, listed, cgroups.TaskRef{TID: fork.tid, TGID: fork.tgid})
}

// startPass checks the one container key at its start: none of its tasks is trusted and
// each has its start time read (a reused tid's ledger entry is refreshed). An automatic
// mode's node is chosen as a full pass chooses, with every other container's choice kept.
func (e *Engine) startPass(key desire.ContainerKey) (plan.Result, bool) {
	if e.desires.draining.Load() {
		return plan.Result{}, false
	}
	e.passMu.Lock()
	defer e.passMu.Unlock()
	p, ok := e.newPass(passStart, nil)
	if !ok {
		return plan.Result{}, false
	}
	if _, ok := p.desired[key]; !ok {
		return plan.Result{}, false // the API's desire came first and does not select it
	}
	e.finish(p, plan.One(e.planInput(p), key, nil))
	return p.results[key], true
}

// planInput is what pass p plans from: the owners' state as views and copies, and the
// kernel as a reader.
func (e *Engine) planInput(p *pass) plan.Input {
	in := plan.Input{
		Desired: p.desired, Known: p.known, Kernel: kernelReader{e.cfg.Kernel}, Cgroups: e.cfg.Resolver,
		ProcRoot: e.cfg.ProcRoot, Support: e.cfg.Support, MemFree: e.cfg.MemFree, Log: e.cfg.Log,
		MaxTasks: e.cfg.MaxTasksPerContainer, LedgerTasks: ledger.TaskCapacity(e.cfg.ledgerLimit), VerifyStarts: e.verifyStarts(p), IDs: p.ids,
		Policies: e.cfg.Policies, PolicyRuntime: e.cfg.PolicyRuntime != nil && e.cfg.PolicyRuntime(), Asked: e.asked.get,
		ReadPolicy: e.policies.read, Migrate: e.moves.offered(), Devices: e.devices.lookupFor(p),
	}
	e.placements.intoInput(&in)
	if p.fork != nil {
		in.ForkTID = p.fork.tid
	}
	return in
}

// verifyStarts says whether pass p reads the start time of every known task that holds
// the agent's value, to refresh the entry of a reused tid that inherited it: a full pass
// after fork events were lost, and a start pass (every task of a starting container is
// new, even one whose tid the ledger knows). Else a fork pass reads only its own event's
// task's, and without fork events no pass does (a read of /proc per task and pass would
// cost as much as the GETs): undo then restores such a task by itself (an inheritor,
// restoreListed).
func (e *Engine) verifyStarts(p *pass) bool {
	return p.kind == passStart || p.kind == passFull && e.forks.lost.Swap(false)
}

// finish applies the pass's plan, publishes its results and reports its metrics.
func (e *Engine) finish(p *pass, pl plan.Plan) {
	defer p.ids.ReleaseAll()
	e.placements.adopt(pl) // the choices saved before the SETs: a crash must not reshuffle a running pod
	if e.cfg.hooks.beforeApply != nil {
		e.cfg.hooks.beforeApply(p.kind)
	}
	e.apply(p, pl)
	e.takeLaneNotes(p, &pl) // a start placed while this pass ran
	if p.kind == passFull {
		e.moves.follow(p.results, p.listing, e.placements.topo.Nodes())
	} else {
		e.moves.fold(p.results, pl.Containers)
	}
	e.forks.noteListing(p.kind == passFull, pl.TGIDs, p.listing)
	e.forks.filterForks()
	if e.published.publish(p.results, p.listing) {
		signal(e.published.changes)
	}
	if p.kind == passFull {
		e.cfg.Metrics.reportResults(p.results)
		e.cfg.Metrics.reportBalancing(e.cfg.ProcRoot)
	}
	e.cfg.Metrics.reportPass(p.kind.String(), e.cfg.Clock.Since(p.start))
}

// persistDesired writes the desired state of generation gen unless it is on disk already.
// A failed write is counted and logged, and retried by the next pass: enforcement does not
// wait for it (the ledger, not this file, is what undo relies on).
func (e *Engine) persistDesired(desired map[desire.ContainerKey]desire.Desire, gen uint64) {
	if err := e.desires.persist(desired, gen); err != nil {
		e.cfg.Metrics.reportDesiredError()
		e.cfg.Log.Error(err, "Persisting the desired state; a restart while the API is unreachable would enforce an older one")
	}
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
func skipUnrecorded(sets []plan.PendingSet, results map[desire.ContainerKey]plan.Result, err error) {
	skipped := map[desire.ContainerKey]int{}
	for _, s := range sets {
		skipped[s.Key]++
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

// unlist removes task tid from pass p's listing of container key: a SET found it gone, or
// not (yet) in the container, so a fork event's look again finds it unlisted. Listings
// are shared once published, so the listing is copied.
func (p *pass) unlist(key desire.ContainerKey, tid int) {
	l, ok := p.listing[key]
	if !ok || !slices.ContainsFunc(l.Tasks, func(t cgroups.TaskRef) bool { return t.TID == tid }) {
		return
	}
	l.Tasks = slices.DeleteFunc(slices.Clone(l.Tasks), func(t cgroups.TaskRef) bool { return t.TID == tid })
	p.listing[key] = l
}

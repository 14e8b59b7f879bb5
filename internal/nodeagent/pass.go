package nodeagent

import (
	"fmt"
	"maps"
	"time"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
)

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
	desired, gen := e.desired, e.desiredGen
	results := maps.Clone(e.results)
	e.mu.Unlock()
	e.persistDesired(desired, gen)

	var sets []pendingSet
	defer func() { e.releaseSets(sets) }()
	dirty, choicesDirty := false, false
	if only == nil {
		results = make(map[ContainerKey]ContainerResult, len(desired))
		e.tgids = make(map[int]ContainerKey)
		e.listing = make(map[ContainerKey]containerListing, len(desired))
		clear(e.forkSets)
		e.hostCgroups = map[ContainerKey]hostCgroup{}
		choicesDirty = e.resolve(desired)
	} else {
		e.listing = maps.Clone(e.listing) // the previous one is published
		e.hostCgroups = nil
	}
	for key, d := range desired {
		if only != nil && !only[key] {
			continue
		}
		if _, chosen := e.resolved[key]; only != nil && d.Placement.Automatic() && !chosen {
			continue // new since the last full pass, which is on its way (SetDesired kicks one)
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
	if choicesDirty {
		e.saveChoices() // before the SETs too: a crash must not reshuffle a running pod
	}
	// A pass whose write ahead fails issues none of its SETs: a value set without its
	// ledger entry could not be undone after a crash.
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
			r.Tasks, r.Node, n, err)
		results[key] = r
	}
}

// resultEqual reports whether two results would publish the same state (Skipped, only
// for metrics, aside).
func resultEqual(a, b ContainerResult) bool {
	return a.Desire == b.Desire && a.Reason == b.Reason && a.Message == b.Message &&
		a.Node == b.Node && a.Why == b.Why && a.Tasks == b.Tasks && maps.Equal(a.Failed, b.Failed)
}

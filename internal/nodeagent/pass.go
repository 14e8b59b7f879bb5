package nodeagent

import (
	"maps"
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
	desired := e.desired
	results := maps.Clone(e.results)
	e.mu.Unlock()

	var sets []pendingSet
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
	e.cfg.Metrics.reportPass(kind, e.cfg.Clock.Since(start))
}

// resultEqual reports whether two results would publish the same state (Skipped, only
// for metrics, aside).
func resultEqual(a, b ContainerResult) bool {
	return a.Desire == b.Desire && a.Reason == b.Reason && a.Message == b.Message &&
		a.Node == b.Node && a.Why == b.Why && a.Tasks == b.Tasks && maps.Equal(a.Failed, b.Failed)
}

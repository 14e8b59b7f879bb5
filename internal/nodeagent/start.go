// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package nodeagent

import (
	"maps"
	"sync"
	"time"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
	"github.com/numapref/numapref/internal/nodeagent/desire"
	"github.com/numapref/numapref/internal/nodeagent/known"
	"github.com/numapref/numapref/internal/nodeagent/plan"
)

// DefaultStartGrace is how long a desire learnt at a container's start counts while the
// API does not report the container running: the kubelet posts a new container's status
// within seconds, or, with many starts at once, tens of seconds.
const DefaultStartGrace = 2 * time.Minute

// PlaceAtStart places a container the runtime is about to start (NRI's StartContainer:
// internal/nodeagent/nri), before the API reports it running. d is its desire
// (desire.PlanStart), whose Ref names the container the runtime starts. At once its tasks
// are set (at the start: the init, whose thread execs the program and keeps the node across
// exec), the ledger written ahead as ever. A Static desire takes the start lane, which
// waits for no pass: every start on the node waits for the agent's answer (the runtime
// serializes its NRI events), and a full pass over a container at its task share, or under
// a fork storm, takes long. An automatic mode's start waits for the pass lock, for its
// choice among every container's. The desire counts until the API's desired state holds
// the same container (its Ref.ContainerID) or for StartGrace of the API answering
// (SetAPIReachable), whichever comes first: from then on the API's desired state alone
// rules, and a container it does not select is undone. ok is false when the engine did
// nothing: before it is synced (the first desired state, the API's or the persisted one)
// and once draining.
func (e *Engine) PlaceAtStart(d desire.Desire) (r plan.Result, ok bool) {
	gen, ok := e.desires.start(d)
	if !ok {
		return plan.Result{}, false
	}
	defer e.desires.started(d.Key())
	e.devices.await(d)
	if !d.Placement.Automatic() {
		return e.startLane(d, gen), true
	}
	return e.startPass(d.Key())
}

// SetAPIReachable tells the engine whether the API server answers the agent. While it
// does not, the agent's cache stands still and cannot confirm any start, so no start
// lapses: a container placed at its start during an outage stays placed through it. When
// the API answers again, each start's grace begins anew, for the kubelet to post the
// statuses it could not.
func (e *Engine) SetAPIReachable(reachable bool) { e.desires.setReachable(reachable) }

// startLane places container d, whose desire is Static, at its start without the pass
// lock: its own lock (one start at a time), the ledger's for its entry (a copy, changed
// through Replace), placedAt's, and the plan of this one container (plan.One: its cgroup
// and the few tasks of its init, every one new). What the owners under the pass lock must
// learn of it (its result and listing) waits in laneNotes for the next pass or fork
// event. A full pass that runs meanwhile read the ledger before the desire (newPass), so
// a container this lane records is never an orphan to it.
func (e *Engine) startLane(d desire.Desire, gen uint64) plan.Result {
	e.startMu.Lock()
	defer e.startMu.Unlock()
	start := e.cfg.Clock.Now()
	key := d.Key()
	ids := plan.NewIdentifier(e.cfg.ProcRoot, e.cfg.handles, e.cfg.maxPIDFDs)
	defer ids.ReleaseAll()
	in := plan.Input{
		Desired: map[desire.ContainerKey]desire.Desire{key: d}, Known: e.ledger.Entry(key), Topology: e.placements.lastTopology(),
		Kernel: kernelReader{e.cfg.Kernel}, Cgroups: e.cfg.Resolver, ProcRoot: e.cfg.ProcRoot, Support: e.cfg.Support, MemFree: e.cfg.MemFree,
		Log: e.cfg.Log, MaxTasks: e.cfg.MaxTasksPerContainer, VerifyStarts: true, IDs: ids, Policies: e.cfg.Policies,
		PolicyRuntime: e.cfg.PolicyRuntime != nil && e.cfg.PolicyRuntime(), Asked: e.asked.get,
	}
	cp := plan.One(in, key, nil).Containers[0]
	note := e.laneApply(cp)
	// A thread takes its creator's value when it is made: one the init makes between the
	// listing and its creator's SET holds none, and the init, which waits for the runtime
	// to let it exec, may still be making threads. So the lane lists the container again
	// after a round that set anything, and sets what is new, until a round sets nothing
	// (a round without SETs leaves no thread half set: whatever is made after it takes
	// the value) or after laneRounds. The last round's result counts every task.
	for round := 1; round < laneRounds && note.set > 0 && note.result.Reason == numav1.ReasonApplied; round++ {
		in.Known = e.ledger.Entry(key)
		cp = plan.One(in, key, note.confirmed).Containers[0]
		note = e.laneApply(cp)
	}
	// Its tasks hold its node before the runtime lets the program run: placed at its start,
	// whoever set them (a pass beside the lane, which read the start's desire, may have, and
	// judge only after the lane has answered).
	if note.result.Tasks > 0 {
		e.judge(passStart, key, true, nil)
	}
	note.result.PlacedAt = e.placements.placed(key)
	note.gen = gen
	e.published.publishOne(key, note.result, cp.Listing)
	e.lane.add(key, note) // after the publishing: a pass that takes it copies the results after
	e.cfg.Metrics.reportPass(passStart.String(), e.cfg.Clock.Since(start))
	return note.result
}

// laneRounds bounds the start lane's rounds of listing and SETs (startLane).
const laneRounds = 4

// laneApply does what the start lane planned for container cp.Key: its ledger entry
// written ahead, its SETs bracketed, their outcome recorded; it returns the container's
// result and what the pass lock's owners must learn. An undo it leaves to the next full
// pass (nothing was set in a container that just starts).
func (e *Engine) laneApply(cp plan.ContainerPlan) laneNote {
	key, r := cp.Key, cp.Result
	note := laneNote{listing: cp.Listing}
	if cp.Entry != nil {
		ch, rerun := *cp.Entry, false
		e.ledger.Replace(key, func(c *known.Container) {
			rerun = c.Ref.ContainerID != "" && !desire.SameContainer(c.Ref.ContainerID, ch.Ref.ContainerID)
			c.Apply(ch)
		})
		if rerun {
			e.placements.forgetPlaced(key) // it runs again, under a new ID: judged again
		}
	}
	if len(cp.Sets) == 0 {
		note.result = r
		return note
	}
	if err := e.ledger.Write(); err != nil {
		e.ledgerFailed(err)
		results := map[desire.ContainerKey]plan.Result{key: r}
		skipUnrecorded(cp.Sets, results, err)
		note.result = results[key]
		return note
	}
	note.result, note.confirmed = e.laneSets(key, r, cp.Sets)
	note.set = len(cp.Sets)
	return note
}

// laneSets issues the start lane's SETs of container key, bracketed, records their outcome
// in its ledger entry (copies, Replace) and returns its result r with it, and the tasks
// whose SETs were confirmed.
func (e *Engine) laneSets(key desire.ContainerKey, r plan.Result, sets []plan.PendingSet) (plan.Result, map[int]bool) {
	b := e.startSets(key, sets[0].Cgroup)
	for _, s := range sets {
		state, err := b.set(s.Task, s.Node, nil)
		switch {
		case state == setSkipped && b.listErr == nil:
			e.ledger.Replace(key, func(c *known.Container) { delete(c.Tasks, s.Task.TID) })
		case state == setRefused:
			e.ledger.Replace(key, func(c *known.Container) { c.TakeValue(s.Task.TID, s.Node) })
			e.cfg.Metrics.reportSet(plan.CountFailure(r.Failed, err))
		}
	}
	confirmed, raced := b.confirm(true)
	e.ledger.Replace(key, func(c *known.Container) {
		for _, s := range confirmed {
			c.Confirm(s.task.TID, s.node)
		}
		for _, s := range raced {
			delete(c.Tasks, s.task.TID)
		}
	})
	set := make(map[int]bool, len(confirmed))
	for _, s := range confirmed {
		set[s.task.TID] = true
		r.Tasks++
		e.cfg.Metrics.reportSet(numav1.ReasonApplied)
	}
	if r.Reason == numav1.ReasonApplied && len(r.Failed) > 0 {
		r.Reason = worstFailure(r.Failed)
	}
	return r, set
}

// laneNote is what the start lane learnt of one container for the owners the pass lock
// guards: its result and listing (the fork tracker's, so that its init's forks find it).
// gen is the generation of the desire that holds the start. set and confirmed are the
// lane's own: how many SETs its round planned, and the tasks whose SETs were confirmed (the
// next round trusts them).
type laneNote struct {
	result    plan.Result
	listing   *plan.Listing
	gen       uint64
	set       int
	confirmed map[int]bool
}

// laneNotes are the start lane's notes until a pass or fork event takes them. It has its
// own lock.
type laneNotes struct {
	mu    sync.Mutex
	notes map[desire.ContainerKey]laneNote
}

func (l *laneNotes) add(key desire.ContainerKey, n laneNote) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.notes == nil {
		l.notes = map[desire.ContainerKey]laneNote{}
	}
	l.notes[key] = n
}

// take returns the notes and forgets them.
func (l *laneNotes) take() map[desire.ContainerKey]laneNote {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := l.notes
	l.notes = nil
	return n
}

// takeLaneNotes gives the owners the pass lock guards what the start lane learnt; the
// caller holds passMu. Taken at a pass's start (p nil), the listings go to the fork
// tracker at once (the results were published before the notes were left). Taken as pass
// p finishes, after its plan pl, the results and listings of the containers pl did not
// plan, or planned from a desire older than the start's, go into p's, which the pass
// publishes and hands the fork tracker.
func (e *Engine) takeLaneNotes(p *pass, pl *plan.Plan) {
	notes := e.lane.take()
	if len(notes) == 0 {
		return
	}
	planned := map[desire.ContainerKey]bool{}
	listing, tgids := maps.Clone(e.forks.listing), map[int]desire.ContainerKey{} // the last listing is published
	if p != nil {
		for _, cp := range pl.Containers {
			planned[cp.Key] = true
		}
		if pl.TGIDs == nil {
			pl.TGIDs = map[int]desire.ContainerKey{}
		}
		listing, tgids = p.listing, pl.TGIDs
	}
	for key, n := range notes {
		if planned[key] && n.gen <= p.gen {
			continue // the pass's own result is of later: its desire held the start
		}
		if p != nil {
			p.results[key] = n.result
		}
		if n.listing != nil {
			listing[key] = *n.listing
			for _, t := range n.listing.Tasks {
				tgids[t.TGID] = key
			}
		}
	}
	if p == nil {
		e.forks.noteListing(false, tgids, listing)
		e.forks.filterForks()
	}
}

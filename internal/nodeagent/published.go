// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package nodeagent

import (
	"maps"
	"slices"
	"strconv"
	"sync"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
	"github.com/numapref/numapref/internal/nodeagent/desire"
	"github.com/numapref/numapref/internal/nodeagent/devices"
	"github.com/numapref/numapref/internal/nodeagent/plan"
)

// published is what the last pass left for readers (Results, Managed, the inspect
// endpoint, the reconcilers): each container's result and listing, and a signal when the
// results change. It has its own lock, held only to copy references, so reading it never
// waits for a pass's host reads.
type published struct {
	mu  sync.Mutex
	res map[desire.ContainerKey]plan.Result
	// managed is the listing of the last pass; it is never modified once published.
	managed map[desire.ContainerKey]plan.Listing
	// changes is signalled after a pass whose results differ from the previous ones.
	changes chan struct{}
}

func newPublished() *published {
	return &published{res: map[desire.ContainerKey]plan.Result{}, changes: make(chan struct{}, 1)}
}

// results is a copy of the last pass's results.
func (p *published) results() map[desire.ContainerKey]plan.Result {
	p.mu.Lock()
	defer p.mu.Unlock()
	return maps.Clone(p.res)
}

// result is container key's last result.
func (p *published) result(key desire.ContainerKey) (plan.Result, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	r, ok := p.res[key]
	return r, ok
}

// anyNodeNotPresent says whether a container's last result is NodeNotPresent.
func (p *published) anyNodeNotPresent() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, r := range p.res {
		if r.Reason == numav1.ReasonNodeNotPresent {
			return true
		}
	}
	return false
}

// publish makes a pass's results and listings the published ones, which the caller no
// longer changes; it reports whether the results changed.
func (p *published) publish(results map[desire.ContainerKey]plan.Result, listing map[desire.ContainerKey]plan.Listing) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	changed := !maps.EqualFunc(results, p.res, resultEqual)
	p.res, p.managed = results, listing
	return changed
}

// publishOne makes r and listing (nil: none) container key's published result and
// listing, the others' unchanged (the start lane's, which holds no pass). The maps are
// copied: published ones are never modified. A change of the results is signalled.
func (p *published) publishOne(key desire.ContainerKey, r plan.Result, listing *plan.Listing) {
	p.mu.Lock()
	defer p.mu.Unlock()
	changed := !resultEqual(r, p.res[key])
	p.res = maps.Clone(p.res)
	p.res[key] = r
	p.managed = maps.Clone(p.managed)
	if p.managed == nil {
		p.managed = map[desire.ContainerKey]plan.Listing{}
	}
	if listing != nil {
		p.managed[key] = *listing
	} else {
		delete(p.managed, key)
	}
	if changed {
		signal(p.changes)
	}
}

// view is every container's result, with its listing (zero when it was not listed).
func (p *published) view() ([]plan.Result, []plan.Listing) {
	p.mu.Lock()
	defer p.mu.Unlock()
	results := make([]plan.Result, 0, len(p.res))
	listings := make([]plan.Listing, 0, len(p.res))
	for key, r := range p.res {
		results = append(results, r)
		listings = append(listings, p.managed[key]) // published listings are never modified
	}
	return results, listings
}

// resultEqual reports whether two results would publish the same state: SkippedTasks,
// only for metrics, aside, and a page move's counts, which grow at each of its steps.
// The move's stage (which home, whether and how it ended) is compared, and so is the
// mechanism it joins once pages moved, so a node's report counts a container's move when
// it starts moving pages and its pages when it ends, not at every rescan in between.
func resultEqual(a, b plan.Result) bool {
	return a.Desire == b.Desire && a.Reason == b.Reason && a.Message == b.Message &&
		a.Node == b.Node && a.Why == b.Why && a.Tasks == b.Tasks && maps.Equal(a.Failed, b.Failed) &&
		a.PlacedAt == b.PlacedAt && a.Mechanism == b.Mechanism && a.Policy == b.Policy &&
		a.Migrate == b.Migrate && moveStage(a.Migration) == moveStage(b.Migration) &&
		slices.Equal(a.PolicyNodes, b.PolicyNodes) && slices.EqualFunc(a.Devices, b.Devices, devices.Device.Equal)
}

// moveStage is a page move without its counts and its last error, and with its state
// only as ended or not: a running move goes between Queued, Moving and Waiting at the
// node's rate.
func moveStage(m plan.Migration) plan.Migration {
	return plan.Migration{Node: m.Node, Ended: m.Ended, State: strconv.FormatBool(m.State == plan.MigrationEnded)}
}

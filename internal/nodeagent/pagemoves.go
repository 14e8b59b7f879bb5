// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package nodeagent

import (
	"slices"

	"github.com/numapref/numapref/internal/nodeagent/desire"
	"github.com/numapref/numapref/internal/nodeagent/migration"
	"github.com/numapref/numapref/internal/nodeagent/plan"
	"github.com/numapref/numapref/internal/numa"
)

// PageMover moves containers' pages to their home off every pass, within the node's rate:
// migration.Worker. Its calls never wait for a move.
type PageMover interface {
	Submit(r migration.Request)
	Cancel(key string)
	Status(key string) (migration.Status, bool)
}

// pageMoves is the engine's owner of page migration: which move it asked for each
// container, so that Once asks once per container (a restarted container, under a new ID,
// is asked again) and FollowHome again at each change of home. The engine's passMu guards
// it.
type pageMoves struct {
	mover PageMover // nil: this node moves no pages
	asked map[desire.ContainerKey]askedMove
}

// askedMove is the move a container was asked: to node, for its container ID then.
type askedMove struct {
	containerID string
	node        int
}

func newPageMoves(mover PageMover) *pageMoves {
	return &pageMoves{mover: mover, asked: map[desire.ContainerKey]askedMove{}}
}

// offered says whether this node moves pages (mechanism migrate).
func (pm *pageMoves) offered() bool { return pm.mover != nil }

// follow, after a full pass, asks for the moves the pass's results want (the first for a
// container, and a new home for FollowHome), cancels those of containers that want none
// any more, and folds where each stands into its result. online are the host's online
// nodes: the pages are moved from every other one to the home.
func (pm *pageMoves) follow(results map[desire.ContainerKey]plan.Result, listing map[desire.ContainerKey]plan.Listing, online []int) {
	if pm.mover == nil {
		return
	}
	for key, r := range results {
		l, listed := listing[key]
		if !r.Migrate || !listed {
			continue
		}
		last, asked := pm.asked[key]
		asked = asked && last.containerID == r.Desire.Ref.ContainerID
		if plan.WantsMove(r.Desire, asked, last.node, r.Node) {
			pm.mover.Submit(moveRequest(key, r.Node, l, online))
			pm.asked[key] = askedMove{containerID: r.Desire.Ref.ContainerID, node: r.Node}
		}
	}
	for key := range pm.asked {
		if r, ok := results[key]; !ok || !r.Migrate {
			pm.mover.Cancel(key.String())
			delete(pm.asked, key)
		}
	}
	for key, r := range results {
		results[key] = pm.folded(key, r)
	}
}

// fold says where its move stands in the result of each container a fork or start pass
// planned (the others keep what the last pass said).
func (pm *pageMoves) fold(results map[desire.ContainerKey]plan.Result, planned []plan.ContainerPlan) {
	for _, cp := range planned {
		if r, ok := results[cp.Key]; ok {
			results[cp.Key] = pm.folded(cp.Key, r)
		}
	}
}

// folded is r with where the move of its pages stands, if it asked for one.
func (pm *pageMoves) folded(key desire.ContainerKey, r plan.Result) plan.Result {
	if !r.Migrate {
		return r
	}
	m := plan.Migration{Node: r.Node, State: plan.MigrationQueued}
	if a, ok := pm.asked[key]; ok && pm.mover != nil {
		m.Node = a.node
		if st, ok := pm.mover.Status(key.String()); ok {
			m = migrationOf(a.node, st)
		}
	}
	plan.FoldMigration(&r, m)
	return r
}

// moveRequest asks for the pages of the processes listed in l to move to node from every
// other online node.
func moveRequest(key desire.ContainerKey, node int, l plan.Listing, online []int) migration.Request {
	var pids []int
	for _, t := range l.Tasks {
		pids = append(pids, t.TGID)
	}
	slices.Sort(pids)
	from := numa.NewNodeMask()
	for _, n := range online {
		if n != node {
			from.Set(n)
		}
	}
	return migration.Request{Key: key.String(), PIDs: slices.Compact(pids), Home: node, From: from}
}

// migrationOf is the worker's status of a move to node, as a result tells it.
func migrationOf(node int, st migration.Status) plan.Migration {
	m := plan.Migration{Node: node, State: string(st.State), Ended: string(st.Reason),
		Moved: int64(st.Moved), NotMoved: int64(st.Failed)}
	if st.LastError != nil {
		m.Error = st.LastError.Error()
	}
	return m
}

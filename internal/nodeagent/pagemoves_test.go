// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package nodeagent

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
	"github.com/numapref/numapref/internal/nodeagent/cgroups"
	"github.com/numapref/numapref/internal/nodeagent/desire"
	"github.com/numapref/numapref/internal/nodeagent/migration"
	"github.com/numapref/numapref/internal/nodeagent/plan"
)

// recordingMover records what it is asked and answers a status per key.
type recordingMover struct {
	submitted []migration.Request
	cancelled []string
	status    map[string]migration.Status
}

func (m *recordingMover) Submit(r migration.Request) { m.submitted = append(m.submitted, r) }
func (m *recordingMover) Cancel(key string)          { m.cancelled = append(m.cancelled, key) }
func (m *recordingMover) Status(key string) (migration.Status, bool) {
	st, ok := m.status[key]
	return st, ok
}

// moveResult is a container asking for a move of mode mig to node, running as id, and
// its listing of two processes.
func moveResult(mig numav1.PageMigration, id string, node int) (plan.Result, plan.Listing) {
	d := desire.Desire{PodUID: "pod", Container: "main", PageMigration: mig, Ref: cgroups.ContainerRef{PodUID: "pod", ContainerID: id}}
	r := plan.Result{Desire: d, Reason: numav1.ReasonApplied, Node: node, Migrate: true}
	l := plan.Listing{Tasks: []cgroups.TaskRef{{TGID: 20, TID: 20}, {TGID: 10, TID: 10}, {TGID: 10, TID: 11}}}
	return r, l
}

// Once asks one move per container, from every other online node, for each process once;
// FollowHome asks again when the home changes; a restarted container (a new ID) is asked
// again; a container no longer asking is cancelled. Each result says where its move
// stands.
func TestPageMovesFollow(t *testing.T) {
	key := desire.ContainerKey{PodUID: "pod", Container: "main"}
	m := &recordingMover{status: map[string]migration.Status{}}
	pm := newPageMoves(m)
	online := []int{0, 1, 2}
	pass := func(mig numav1.PageMigration, id string, node int) plan.Result {
		r, l := moveResult(mig, id, node)
		results := map[desire.ContainerKey]plan.Result{key: r}
		pm.follow(results, map[desire.ContainerKey]plan.Listing{key: l}, online)
		return results[key]
	}

	r := pass(numav1.PageMigrationOnce, "a", 1)
	if len(m.submitted) != 1 {
		t.Fatalf("%d moves asked, want 1", len(m.submitted))
	}
	got := m.submitted[0]
	if got.Key != key.String() || got.Home != 1 || !cmp.Equal(got.PIDs, []int{10, 20}) || !cmp.Equal(got.From.IDs(), []int{0, 2}) {
		t.Errorf("asked %+v from %v; want %s's processes 10 and 20 to node 1 from 0 and 2", got, got.From.IDs(), key)
	}
	if r.Reason != numav1.ReasonMigratingPages || r.Migration.State != plan.MigrationQueued {
		t.Errorf("before any status: %s, %+v; want MigratingPages, queued", r.Reason, r.Migration)
	}
	m.status[key.String()] = migration.Status{State: migration.StateEnded, Reason: migration.ReasonMoved, Moved: 42}
	r = pass(numav1.PageMigrationOnce, "a", 2) // the home changed: Once does not move again
	if len(m.submitted) != 1 || r.Reason != numav1.ReasonApplied || r.Migration.Moved != 42 || r.Mechanism != plan.MechanismMigrate {
		t.Errorf("Once after a change of home: %d asked, %s by %q, %+v; want 1 asked, Applied by migrate with 42 pages",
			len(m.submitted), r.Reason, r.Mechanism, r.Migration)
	}
	pass(numav1.PageMigrationOnce, "b", 2) // restarted
	if len(m.submitted) != 2 || m.submitted[1].Home != 2 {
		t.Errorf("a restarted container: %d asked; want a second move, to node 2", len(m.submitted))
	}
	pass(numav1.PageMigrationFollowHome, "b", 2)
	pass(numav1.PageMigrationFollowHome, "b", 0)
	if len(m.submitted) != 3 || m.submitted[2].Home != 0 {
		t.Errorf("FollowHome: %d asked; want a third move, to node 0", len(m.submitted))
	}
	pm.follow(map[desire.ContainerKey]plan.Result{}, nil, online)
	if !cmp.Equal(m.cancelled, []string{key.String()}) || len(pm.asked) != 0 {
		t.Errorf("a container no longer desired: cancelled %v, asked %v; want it cancelled and forgotten", m.cancelled, pm.asked)
	}
}

// Without a mover nothing is asked, and a result keeps what planning said.
func TestPageMovesNone(t *testing.T) {
	pm := newPageMoves(nil)
	key := desire.ContainerKey{PodUID: "pod", Container: "main"}
	r, l := moveResult(numav1.PageMigrationOnce, "a", 1)
	r.Migrate = false // planning sets it only where the node moves pages
	results := map[desire.ContainerKey]plan.Result{key: r}
	pm.follow(results, map[desire.ContainerKey]plan.Listing{key: l}, []int{0, 1})
	if pm.offered() || results[key].Reason != numav1.ReasonApplied || results[key].Migration != (plan.Migration{}) {
		t.Errorf("no mover: offered %v, result %+v", pm.offered(), results[key])
	}
}

// The worker's states and reasons are the ones results name.
func TestMigrationNames(t *testing.T) {
	pairs := map[string]string{
		string(migration.StateQueued): plan.MigrationQueued, string(migration.StateMoving): plan.MigrationMoving,
		string(migration.StateWaiting): plan.MigrationWaiting, string(migration.StateEnded): plan.MigrationEnded,
		string(migration.ReasonMoved): plan.MigrationMoved, string(migration.ReasonPagesStayed): plan.MigrationPagesStayed,
		string(migration.ReasonGone): plan.MigrationGone, string(migration.ReasonPermissionDenied): plan.MigrationPermissionDenied,
		string(migration.ReasonPinned): plan.MigrationPinned, string(migration.ReasonFailed): plan.MigrationFailed,
		string(migration.ReasonReplaced): plan.MigrationReplaced, string(migration.ReasonCancelled): plan.MigrationCancelled,
	}
	for worker, result := range pairs {
		if worker != result {
			t.Errorf("the worker says %q where results say %q", worker, result)
		}
	}
}

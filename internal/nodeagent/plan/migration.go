// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package plan

import (
	"fmt"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
	"github.com/numapref/numapref/internal/nodeagent/desire"
)

// MechanismMigrate: the agent moved the container's pages to its home (move_pages(2)),
// once, or at each change of home (spec.pageMigration).
const MechanismMigrate = "migrate"

// The states of a container's page migration, as the engine's page mover tells them.
const (
	MigrationQueued  = "Queued"  // asked, waiting for its turn or the node's rate
	MigrationMoving  = "Moving"  // a step of it runs
	MigrationWaiting = "Waiting" // waiting to try again after an error or pages that stayed
	MigrationEnded   = "Ended"   // done: Migration.Ended says how
)

// Why a container's page migration ended (Migration.Ended).
const (
	MigrationMoved            = "Moved"            // every page found away from the home moved
	MigrationPagesStayed      = "PagesStayed"      // some pages still did not move after the last try
	MigrationGone             = "ProcessesGone"    // every process exited
	MigrationPermissionDenied = "PermissionDenied" // no right to move the processes' pages
	MigrationPinned           = "CpusetPinned"     // the home is outside the processes' cpuset.mems
	MigrationFailed           = "Failed"           // kernel errors in a row
	MigrationReplaced         = "Replaced"         // a request for another home came
	MigrationCancelled        = "Cancelled"        // no longer asked
)

// Migration is where the move of a container's pages to its home stands.
type Migration struct {
	// Node is the home the pages are moved to, State where the move stands ("" before the
	// engine asked for it) and Ended, when State is MigrationEnded, how it ended.
	Node  int
	State string
	Ended string
	// Moved counts the pages moved, NotMoved those the kernel left where they were, at
	// each try.
	Moved, NotMoved int64
	// Error is the last error of a step, if any.
	Error string
}

// WantsMove says whether a container whose desire is d and whose last move (if any) is
// m, to node last, gets a new move to its home node: the first time it is asked, and for
// FollowHome each time the home changes. asked says a move was asked before.
func WantsMove(d desire.Desire, asked bool, last, node int) bool {
	if !asked {
		return true
	}
	return d.PageMigration == numav1.PageMigrationFollowHome && last != node
}

// migrates says whether the container of desire d gets its pages moved to its home.
func (pl *planner) migrates(d desire.Desire) bool { return pl.in.Migrate && d.WantsMigration() }

// noMigration is what a container's message adds when it asks for page migration on a
// node that does not move pages.
func (pl *planner) noMigration(d desire.Desire) string {
	if !d.WantsMigration() || pl.in.Migrate {
		return ""
	}
	return "; and this node's agent does not move pages (spec.pageMigration): --page-migration-rate is 0, or the kernel has no page migration"
}

// FoldMigration says in r what the move of its pages did, m, for a container whose plan
// asked for one (r.Migrate). Pages moved make migrate one of its mechanisms. Where no
// other mechanism gives the container its home (no prctl, no memory policy on its home),
// the move is what r's reason says: Applied once the pages moved (the message keeps why
// nothing else acts), MigratingPages while they move, or why they did not.
func FoldMigration(r *Result, m Migration) {
	if !r.Migrate {
		return
	}
	r.Migration = m
	other := r.Mechanism != "" // the prctl or a memory policy gives the container its home
	moved := m.Moved > 0 || m.State == MigrationEnded && m.Ended == MigrationMoved
	if moved {
		r.Mechanism = joinMechanisms(r.Mechanism, MechanismMigrate)
	}
	if other {
		return // the reason is the other mechanism's; inspect shows the move
	}
	why := ""
	if r.Reason != numav1.ReasonApplied {
		why = "; " + r.Message // why nothing else gives it its home
	} else {
		why = "; nothing else steers its new memory or its tasks on this node"
	}
	if moved {
		r.Reason = numav1.ReasonApplied
		r.Message = fmt.Sprintf("its pages were moved to NUMA node %d (page migration)%s", r.Node, why)
		return
	}
	reason, msg := migrationReason(m)
	r.Reason, r.Message = reason, msg+why
}

// migrationReason is the reason and message of a container whose pages did not move (yet).
func migrationReason(m Migration) (string, string) {
	if m.State != MigrationEnded {
		return numav1.ReasonMigratingPages, fmt.Sprintf("its pages are being moved to NUMA node %d (page migration)", m.Node)
	}
	switch m.Ended {
	case MigrationPermissionDenied:
		return numav1.ReasonPermissionDenied, fmt.Sprintf("the kernel refused to move its pages to NUMA node %d: %s", m.Node, m.Error)
	case MigrationPinned:
		return numav1.ReasonMemoryPinnedElsewhere, fmt.Sprintf("its cpuset.mems leaves out NUMA node %d: no page is moved against it", m.Node)
	case MigrationFailed:
		return numav1.ReasonKernelError, fmt.Sprintf("moving its pages to NUMA node %d failed: %s", m.Node, m.Error)
	case MigrationPagesStayed:
		return numav1.ReasonPagesNotMoved, fmt.Sprintf("none of its pages moved to NUMA node %d after the last try (the node full, the pages busy or pinned)", m.Node)
	}
	// Gone, replaced or cancelled: a new move is asked at the next full pass.
	return numav1.ReasonMigratingPages, fmt.Sprintf("its pages are being moved to NUMA node %d (page migration)", m.Node)
}

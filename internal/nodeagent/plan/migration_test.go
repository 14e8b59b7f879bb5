// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package plan

import (
	"strings"
	"testing"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
	"github.com/numapref/numapref/internal/nodeagent/desire"
	"github.com/numapref/numapref/internal/numa"
)

// On a kernel without the prctl and a node whose runtime gives no memory policy, a
// container that asks for page migration is listed for it where the node moves pages,
// and is KernelUnsupported, saying migration is off, where it does not. One that does not
// ask is KernelUnsupported either way.
func TestPlanMigrationWithoutOtherMechanisms(t *testing.T) {
	for name, tc := range map[string]struct {
		migration numav1.PageMigration
		offered   bool
		reason    string
		migrate   bool
		says      string
	}{
		"asked, offered":     {numav1.PageMigrationOnce, true, numav1.ReasonApplied, true, ""},
		"asked, not offered": {numav1.PageMigrationFollowHome, false, numav1.ReasonKernelUnsupported, false, "does not move pages"},
		"not asked, offered": {numav1.PageMigrationNever, true, numav1.ReasonKernelUnsupported, false, ""},
		"not asked, no node": {"", false, numav1.ReasonKernelUnsupported, false, ""},
	} {
		t.Run(name, func(t *testing.T) {
			h := newFakeHost(t, map[int]int{100: -1, 101: -1})
			in := h.input(nil)
			d := mainWant
			d.PageMigration, d.MemoryPolicy = tc.migration, numav1.MemoryPolicyNever
			in.Desired[mainKey] = d
			in.Support, in.Migrate = numa.Support{Reason: "no patch"}, tc.offered
			pl := Full(in)
			cp := pl.Containers[0]
			r := cp.Result
			if r.Reason != tc.reason || r.Migrate != tc.migrate {
				t.Fatalf("reason %s (%s), migrate %v; want %s, %v", r.Reason, r.Message, r.Migrate, tc.reason, tc.migrate)
			}
			if tc.migrate && (cp.Listing == nil || len(cp.Listing.Tasks) != 2 || len(cp.Sets) > 0 || cp.Entry != nil) {
				t.Errorf("a container to migrate without the prctl: listing %+v, %d SETs, entry %+v; want its 2 tasks listed, nothing set or recorded",
					cp.Listing, len(cp.Sets), cp.Entry)
			}
			if !strings.Contains(r.Message, tc.says) {
				t.Errorf("message %q does not say %q", r.Message, tc.says)
			}
		})
	}
}

// Beside the prctl, migration is asked for and the prctl still acts.
func TestPlanMigrationBesideThePrctl(t *testing.T) {
	h := newFakeHost(t, map[int]int{100: -1})
	in := h.input(nil)
	d := mainWant
	d.PageMigration = numav1.PageMigrationOnce
	in.Desired[mainKey] = d
	in.Migrate = true
	cp := Full(in).Containers[0]
	if !cp.Result.Migrate || len(cp.Sets) != 1 || cp.Result.Mechanism != MechanismPrctl {
		t.Errorf("migrate %v, %d SETs, mechanism %q; want migrate, the one SET, prctl", cp.Result.Migrate, len(cp.Sets), cp.Result.Mechanism)
	}
}

// What a move did decides the result's reason only where no other mechanism gives the
// container its home: Applied once pages moved (keeping why nothing else acts), waiting
// while they move, and each refusal its reason; beside the prctl, the reason stays the
// prctl's and migrate joins its mechanisms once pages moved.
func TestFoldMigration(t *testing.T) {
	alone := Result{Reason: numav1.ReasonPolicyAtCreationOnly, Message: "created before it was selected", Node: 1, Migrate: true}
	withPrctl := Result{Reason: numav1.ReasonApplied, Mechanism: MechanismPrctl, Node: 1, Migrate: true}
	for name, tc := range map[string]struct {
		r              Result
		m              Migration
		reason, mech   string
		message, keeps string
	}{
		"queued": {alone, Migration{Node: 1, State: MigrationQueued},
			numav1.ReasonMigratingPages, "", "being moved", "created before"},
		"moving, some moved": {alone, Migration{Node: 1, State: MigrationMoving, Moved: 10},
			numav1.ReasonApplied, MechanismMigrate, "were moved to NUMA node 1", "created before"},
		"ended, nothing to move": {alone, Migration{Node: 1, State: MigrationEnded, Ended: MigrationMoved},
			numav1.ReasonApplied, MechanismMigrate, "were moved", "created before"},
		"denied": {alone, Migration{Node: 1, State: MigrationEnded, Ended: MigrationPermissionDenied, Error: "EPERM"},
			numav1.ReasonPermissionDenied, "", "refused", "EPERM"},
		"pinned": {alone, Migration{Node: 1, State: MigrationEnded, Ended: MigrationPinned},
			numav1.ReasonMemoryPinnedElsewhere, "", "cpuset.mems", "created before"},
		"failed": {alone, Migration{Node: 1, State: MigrationEnded, Ended: MigrationFailed, Error: "EIO"},
			numav1.ReasonKernelError, "", "failed", "EIO"},
		"stayed": {alone, Migration{Node: 1, State: MigrationEnded, Ended: MigrationPagesStayed, NotMoved: 50},
			numav1.ReasonPagesNotMoved, "", "none of its pages moved", "created before"},
		"gone, asked again": {alone, Migration{Node: 1, State: MigrationEnded, Ended: MigrationGone},
			numav1.ReasonMigratingPages, "", "being moved", ""},
		"migration alone, moved": {Result{Reason: numav1.ReasonApplied, Node: 0, Migrate: true}, Migration{Node: 0, State: MigrationEnded, Ended: MigrationMoved, Moved: 3},
			numav1.ReasonApplied, MechanismMigrate, "were moved to NUMA node 0", "nothing else steers"},
		"beside the prctl, denied": {withPrctl, Migration{Node: 1, State: MigrationEnded, Ended: MigrationPermissionDenied},
			numav1.ReasonApplied, MechanismPrctl, "", ""},
		"beside the prctl, moved": {withPrctl, Migration{Node: 1, State: MigrationEnded, Ended: MigrationMoved, Moved: 7},
			numav1.ReasonApplied, MechanismPrctl + "+" + MechanismMigrate, "", ""},
		"not asked": {Result{Reason: numav1.ReasonKernelUnsupported, Message: "m"}, Migration{State: MigrationEnded, Ended: MigrationMoved, Moved: 7},
			numav1.ReasonKernelUnsupported, "", "m", ""},
	} {
		t.Run(name, func(t *testing.T) {
			r := tc.r
			FoldMigration(&r, tc.m)
			if r.Reason != tc.reason || r.Mechanism != tc.mech {
				t.Errorf("reason %s by %q (%s); want %s by %q", r.Reason, r.Mechanism, r.Message, tc.reason, tc.mech)
			}
			for _, s := range []string{tc.message, tc.keeps} {
				if !strings.Contains(r.Message, s) {
					t.Errorf("message %q does not say %q", r.Message, s)
				}
			}
			if r.Migrate && r.Migration != tc.m {
				t.Errorf("migration %+v, want %+v", r.Migration, tc.m)
			}
		})
	}
}

// A move is asked the first time, and again only for FollowHome when the home changed.
func TestWantsMove(t *testing.T) {
	once := desire.Desire{PageMigration: numav1.PageMigrationOnce}
	follow := desire.Desire{PageMigration: numav1.PageMigrationFollowHome}
	for name, tc := range map[string]struct {
		d          desire.Desire
		asked      bool
		last, node int
		want       bool
	}{
		"once, first":            {once, false, 0, 1, true},
		"once, same home":        {once, true, 1, 1, false},
		"once, new home":         {once, true, 0, 1, false},
		"follow, first":          {follow, false, 0, 0, true},
		"follow, same home":      {follow, true, 1, 1, false},
		"follow, home changed":   {follow, true, 0, 1, true},
		"follow, home came back": {follow, true, 1, 0, true},
	} {
		if got := WantsMove(tc.d, tc.asked, tc.last, tc.node); got != tc.want {
			t.Errorf("%s: WantsMove %v, want %v", name, got, tc.want)
		}
	}
}

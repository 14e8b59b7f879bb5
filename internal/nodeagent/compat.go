package nodeagent

import (
	"github.com/numapref/numapref/internal/nodeagent/desire"
	"github.com/numapref/numapref/internal/nodeagent/ledger"
	"github.com/numapref/numapref/internal/nodeagent/plan"
)

// The names code outside this package knew here before they moved to the packages of
// their own. Each forwards to its new home; callers move to that home, and the name goes.

type (
	// Desire is desire.Desire.
	Desire = desire.Desire
	// ContainerKey is desire.ContainerKey.
	ContainerKey = desire.ContainerKey
	// Placement is desire.Placement.
	Placement = desire.Placement
	// Conflict is desire.Conflict.
	Conflict = desire.Conflict
	// PodPlan is desire.PodPlan.
	PodPlan = desire.PodPlan
	// ContainerResult is plan.Result.
	ContainerResult = plan.Result
)

var (
	// PlanPod is desire.PlanPod.
	PlanPod = desire.PlanPod
	// PlanStart is desire.PlanStart.
	PlanStart = desire.PlanStart
	// ParseNodeAnnotation is desire.ParseNodeAnnotation.
	ParseNodeAnnotation = desire.ParseNodeAnnotation
	// ErrLedgerDamaged is ledger.ErrDamaged.
	ErrLedgerDamaged = ledger.ErrDamaged
)

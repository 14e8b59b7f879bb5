// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package metrics

import "github.com/prometheus/client_golang/prometheus"

// The node agent's metrics.

// Engine holds the engine's metrics (internal/nodeagent observes them).
type Engine struct {
	Sets        *prometheus.CounterVec // by result
	Restores    prometheus.Counter
	Containers  *prometheus.GaugeVec // by reason, numa_node
	Tasks       prometheus.Gauge
	PassSeconds *prometheus.HistogramVec // by kind
	Kernel      *prometheus.GaugeVec     // by backend
	TaskStates  *prometheus.GaugeVec     // by reason
	Balancing   *prometheus.GaugeVec     // by mode
	ForkLag     *prometheus.HistogramVec // by since
	ForkStages  *prometheus.HistogramVec // by stage
	// StartToPlaced is by at: Start or AfterStart.
	StartToPlaced *prometheus.HistogramVec
	LedgerErrs    prometheus.Counter
	DesiredErrs   prometheus.Counter
	// LedgerDamaged is 1 once the ledger read at start was damaged.
	LedgerDamaged prometheus.Gauge
	// PagesMigrated and PagesNotMigrated count the pages the page mover moved to their
	// home and those the kernel did not move; MigrationsEnded its requests by reason.
	PagesMigrated    prometheus.Counter
	PagesNotMigrated prometheus.Counter
	MigrationsEnded  *prometheus.CounterVec
}

// forkLagBuckets are the buckets of the fork lag and its stages: 50 µs to 1.6 s by factors
// of 2, fine enough to tell a 2 ms p99 (the goal) from a 3 ms one, which factors of 4
// (0.8, 3.2 ms) could not.
var forkLagBuckets = prometheus.ExponentialBuckets(0.00005, 2, 16)

// The help texts of the engine's metrics, as dashboards and alerts know them.
const (
	helpSets = "Preferred-node SETs the agent issued, by result (Applied, PermissionDenied, KernelError; raced: the task " +
		"exited or left its container around the SET, which may have hit another task: a pass's is put back, an undo's is not)."
	helpRestores   = "Tasks whose value the agent put back when their container was no longer selected."
	helpContainers = "Selected containers on this node by state (Applied or the reason they are skipped) and, for Applied ones, the NUMA node they prefer."
	helpTasks      = "Tasks of selected containers that have their preferred node."
	helpPass       = "Duration of engine passes: full (every container: rescans and desired-state changes), fork (one container, on a fork event) or start (one container the runtime is starting, through NRI)."
	helpKernel     = "1 when the agent's kernel backend can set preferred nodes, by backend."
	helpTaskStates = "Tasks of selected containers after the last full pass, by reason: Applied (have the preferred node), " +
		"PermissionDenied or KernelError (the kernel refused), MemoryPinnedElsewhere (the container was skipped). " +
		"Containers skipped before their tasks are read (e.g. KernelUnsupported, NodeNotPresent) count in numapref_containers only."
	helpBalancing = "1 for the kernel.numa_balancing mode of this node (disabled, normal, memory-tiering, normal-memory-tiering; " +
		"unavailable without the sysctl, unreadable when it cannot be read). Read at start and on every full pass."
	helpForkLag = "Time from a fork event to the return of the SET that gives the new task its preferred node, for tasks " +
		"set by a fork-event pass (their own event's, or an earlier event's that listed them first; tasks a full pass " +
		"sets are not observed). since=event: from the kernel's timestamp of the event (CLOCK_MONOTONIC at fork, " +
		"so it includes the wait in the socket and behind other passes); since=arrival: from the event's arrival in " +
		"the engine, for events without a usable timestamp (own pass only)."
	helpForkStages = "The parts of numapref_fork_apply_lag_seconds, for tasks set by their own fork event's pass: deliver (in the " +
		"proc connector's socket until the engine read the event; 0 without a kernel timestamp), wait (behind other " +
		"passes), retry (until a pass listed the task in its cgroup: the kernel sends the event before it moves the " +
		"child there), plan (listing the container, reading its new tasks), writeahead (the ledger's record, appended to its journal), " +
		"set (the bracketed SET). A fork's stages add up to its lag since the event."
	helpStartToPlaced = "Time from a container's start to its first preferred-node SET by this agent, observed once per " +
		"container (again if it is undone and placed anew, or restarts). at=Start: set by a start pass (the " +
		"runtime's NRI StartContainer) before its first instruction, observed as 0. at=AfterStart: set by any " +
		"other pass (the API's pod status, a fork event, a rescan), from the earliest start time of the tasks " +
		"set (/proc starttime, CLOCK_BOOTTIME) to the SETs' return; containers that started before this agent " +
		"are not observed."
	helpLedgerErrs = "Failed writes of the agent's ledger (disk full or read-only, past its size bound, a link in its place). " +
		"A failed write ahead of SETs skips them: their containers report LedgerError, and a pass retries soon."
	helpDesiredErrs = "Failed writes of the persisted desired state (desired.json beside the ledger), which an agent restarted " +
		"while the API is unreachable enforces. Placement goes on; the next pass writes again."
	helpPagesMigrated = "Pages the agent moved to their container's home NUMA node (spec.pageMigration, move_pages(2)), " +
		"at the rate the node allows (--page-migration-rate)."
	helpPagesNotMigrated = "Pages the agent asked the kernel to move to their container's home and that stayed (the home node " +
		"full, the page busy or pinned), counted at each pass over the container: a page tried three times counts three times."
	helpMigrationsEnded = "Page migrations of a container that ended, by reason: Moved (every page found elsewhere moved), " +
		"PagesStayed, ProcessesGone, PermissionDenied, CpusetPinned, Failed (errors in a row), Replaced (its home changed) " +
		"or Cancelled (no longer asked)."
	helpLedgerDamaged = "1 when the ledger this agent read at start was damaged (unreadable, past its bound, unparsable or failing " +
		"its checksum): what it recorded is lost, so values set before may never be undone. Stays 1 until the agent restarts."
)

// NewEngine makes the engine's metrics; Register exposes them.
func NewEngine() *Engine {
	return &Engine{
		Sets:          counterVec("task_sets_total", helpSets, "result"),
		Restores:      counter("task_restores_total", helpRestores),
		Containers:    gaugeVec("containers", helpContainers, "reason", "numa_node"),
		Tasks:         gauge("managed_tasks", helpTasks),
		PassSeconds:   histogramVec("pass_duration_seconds", helpPass, prometheus.ExponentialBuckets(0.0001, 4, 10), "kind"),
		Kernel:        gaugeVec("kernel_supported", helpKernel, "backend"),
		TaskStates:    gaugeVec("tasks", helpTaskStates, "reason"),
		Balancing:     gaugeVec("numa_balancing", helpBalancing, "mode"),
		ForkLag:       histogramVec("fork_apply_lag_seconds", helpForkLag, forkLagBuckets, "since"),
		ForkStages:    histogramVec("fork_apply_stage_seconds", helpForkStages, forkLagBuckets, "stage"),
		StartToPlaced: histogramVec("start_to_placed_seconds", helpStartToPlaced, prometheus.ExponentialBuckets(0.001, 2, 16), "at"), // 1 ms to 33 s
		LedgerErrs:    counter("ledger_write_errors_total", helpLedgerErrs),
		DesiredErrs:   counter("desired_state_write_errors_total", helpDesiredErrs),
		LedgerDamaged: gauge("ledger_damaged", helpLedgerDamaged),

		PagesMigrated:    counter("migrated_pages_total", helpPagesMigrated),
		PagesNotMigrated: counter("migration_failed_pages_total", helpPagesNotMigrated),
		MigrationsEnded:  counterVec("migrations_ended_total", helpMigrationsEnded, "reason"),
	}
}

// Register adds the engine's metrics to reg.
func (m *Engine) Register(reg prometheus.Registerer) error {
	return register(reg, m.Sets, m.Restores, m.Containers, m.Tasks, m.PassSeconds, m.Kernel, m.TaskStates, m.Balancing,
		m.ForkLag, m.ForkStages, m.StartToPlaced, m.LedgerErrs, m.DesiredErrs, m.LedgerDamaged,
		m.PagesMigrated, m.PagesNotMigrated, m.MigrationsEnded)
}

// Effect describes what the effect collector (internal/nodeagent) reads at scrape time,
// per selected container; ReadErrors by source.
type Effect struct {
	Faults, Migrated, Memory, Locality, ReadErrors *prometheus.Desc
}

// NewEffect describes the effect metrics.
func NewEffect() Effect {
	labels := []string{"namespace", "pod", "container"}
	return Effect{
		Faults: desc("container_numa_faults",
			"NUMA hinting faults of the container's tasks: the sum of total_numa_faults in /proc/<tid>/sched over the tasks "+
				"the agent listed last. The kernel decays each task's count, and exited tasks drop out, so this is a gauge.",
			labels...),
		Migrated: desc("container_numa_pages_migrated",
			"Pages NUMA balancing migrated for the container's tasks: the sum of numa_pages_migrated in /proc/<tid>/sched "+
				"over the tasks the agent listed last (drops when tasks exit).",
			labels...),
		Memory: desc("container_memory_bytes",
			"Memory of the container on each NUMA node: anon+file of memory.numa_stat on cgroup v2; on cgroup v1 the pages "+
				"mapped by its processes (/proc/<pid>/numa_maps, each process once, shared pages in every process mapping them).",
			append(labels, "numa_node")...),
		Locality: desc("container_memory_locality_ratio",
			"Share of the container's memory (numapref_container_memory_bytes) on its preferred NUMA node, 0 to 1.",
			labels...),
		ReadErrors: desc("effect_read_errors_total",
			"Reads the effect metrics skipped because a file of a live task or cgroup could not be read or parsed, by source.",
			"source"),
	}
}

// All lists the effect metrics' descriptions.
func (e Effect) All() []*prometheus.Desc {
	return []*prometheus.Desc{e.Faults, e.Migrated, e.Memory, e.Locality, e.ReadErrors}
}

// NRI describes the NRI plugin's metrics (internal/nodeagent/nri reads them at scrape time).
type NRI struct {
	Connected, Connects, Disconnects, Starts, Creates, Policies, Late, Panics *prometheus.Desc
}

// NewNRI describes the NRI plugin's metrics.
func NewNRI() NRI {
	return NRI{
		Connected:   desc("nri_connected", "1 while the agent is registered with the container runtime as an NRI plugin (--nri-socket), else 0."),
		Connects:    desc("nri_connects_total", "Registrations with the container runtime's NRI that completed (the first, and one after each runtime restart)."),
		Disconnects: desc("nri_disconnects_total", "NRI connections lost after registration (a runtime restart, or a plugin the runtime dropped)."),
		Starts:      desc("nri_container_starts_total", "Containers the runtime handed to the agent as it started them (StartContainer)."),
		Creates:     desc("nri_container_creates_total", "Containers the runtime handed to the agent as it created them (CreateContainer)."),
		Policies:    desc("nri_memory_policies_total", "Containers the agent asked the runtime to create with a memory policy on their home (CreateContainer's linux.memoryPolicy)."),
		Late:        desc("nri_late_placements_total", "Placements at a container's start that had not returned by their deadline: the runtime got its answer without them."),
		Panics:      desc("nri_placer_panics_total", "Placements at a container's start that panicked: the runtime got its answer, the agent kept running, and the container is placed once the API reports it running."),
	}
}

// All lists the NRI metrics' descriptions.
func (n NRI) All() []*prometheus.Desc {
	return []*prometheus.Desc{n.Connected, n.Connects, n.Disconnects, n.Starts, n.Creates, n.Policies, n.Late, n.Panics}
}

// The node agent's controllers' metrics (controllers/agent observes them). They are
// process-wide, like the controllers: RegisterControllers adds them once.
var (
	// ReportWrites counts the node agent's writes of its NumaNodeReport by result (ok,
	// error): a node that cannot report keeps enforcing, and says so here and in its log.
	ReportWrites = counterVec("report_writes_total", "Writes of this node's NumaNodeReport, by result (ok, error).", "result")

	// NodeRestrictionMissing is 1 while the node restriction check finds that the API
	// accepts this agent's writes outside its own node, 0 once the policy refused them, -1
	// while the API's answers prove neither. The alerts NumaprefNodeRestrictionMissing and
	// NumaprefNodeRestrictionUnknown fire on it.
	NodeRestrictionMissing = gauge("node_restriction_missing",
		"1 when the API accepted this agent's dry-run writes of another node's report or of a foreign label on its own Node, "+
			"which the node restriction policy refuses; 0 when the policy refused them; -1 when the answers proved neither "+
			"(a refusal by something other than the policy, an error, a webhook that cannot dry-run).")
)

// Why the agent's cache keeps a NumaPreference by name only: the label values of
// numapref_preferences_held_back.
const (
	// HeldOverCap: the summarizer judged it past its namespace's cap (reason
	// TooManyPreferences in its status).
	HeldOverCap = "over_cap"
	// HeldUnjudged: its namespace already has twice the cap whole in this agent's cache and
	// the summarizer has not judged it yet (a flood of new preferences).
	HeldUnjudged = "unjudged"
)

// PreferencesHeldBack counts the NumaPreferences the agent's cache keeps by name only, by
// why (controllers/agent's PreferenceCap). The alert NumaprefPreferencesHeldBack fires on
// it.
var PreferencesHeldBack = func() *prometheus.GaugeVec {
	g := gaugeVec("preferences_held_back",
		"NumaPreferences this agent keeps by name only and applies to no pod, by why: over_cap (the summarizer judged them past "+
			"their namespace's cap, --max-preferences-per-namespace: reason TooManyPreferences in their status), unjudged (their "+
			"namespace has twice the cap whole in this agent's cache and the summarizer has not judged them yet).", "why")
	g.WithLabelValues(HeldOverCap)
	g.WithLabelValues(HeldUnjudged)
	return g
}()

// RegisterControllers registers the agent's controllers' metrics and the API requests in
// reg.
func RegisterControllers(reg prometheus.Registerer) error {
	return register(reg, APIRequests, ReportWrites, NodeRestrictionMissing, PreferencesHeldBack)
}

// NewAPIReachable is numapref_api_reachable, which the agent's API reachability sets.
func NewAPIReachable() prometheus.Gauge {
	return gauge("api_reachable",
		"1 while the API server answers the agent's requests, 0 from a request that failed (no connection, a timeout, a 502, 503 or 504) until the next answer. "+
			"Containers placed at their start (NRI) keep their placement meanwhile.")
}

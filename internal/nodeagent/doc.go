// Package nodeagent is what the agent does on its node between the API and the kernel:
// it decides which NUMA node each container of the node's pods should prefer (PlanPod,
// desired.go), and its Engine gives that node to every task of those containers, keeps it
// as tasks come and go, and undoes it when a container is no longer selected.
//
// The engine's files follow its jobs. Each pass is a value (kueue's scheduler builds a
// fresh snapshot per cycle the same way): it plans, which only reads, then applies.
//
//	engine.go   the Engine, its config, SetDesired/Results/Changes/Drain and the loop
//	            (Start): a full pass on every desired-state change and rescan tick, a
//	            fork pass on every fork event
//	pass.go     a pass's own state (desire, results, listings), fullPass and forkPass
//	plan.go     planning: the planner reads cgroups, /proc and the kernel's GET (a
//	            numa.PreferredNodeReader: it cannot SET) and returns a plan (what to SET,
//	            what to undo, the ledger entries to write ahead)
//	placement.go
//	            planning too: the automatic modes' choice of node (FollowCPUs, Spread,
//	            MostFreeMemory)
//	apply.go    applying a plan: ledger entries, write-ahead, the SETs, undo and restore
//	bracket.go  the checks around every SET: the task is still the one identified (its
//	            pidfd, or its start time) and still in the container, before and after
//	fork.go     fork events, looking again for a child not yet in its cgroup, the tasks a
//	            fork pass trusts, the fork-to-SET lag
//	placed.go   how each container was first placed (at its start, after it, before the
//	            agent's restart) and the time from its start to then
//	forkfilter.go
//	            the kernel's filter of fork events kept in step with the listings: only
//	            forks of listed processes, or of ones born after the last-pid mark, wake
//	            the agent
//	share.go    one container's share of the ledger and pidfds (TooManyTasks)
//	topology.go the online nodes and CPUs, read again at every full pass (hotplug)
//	ledger.go   what the agent set, on disk, written ahead of every SET (no SET when the
//	            write fails): the snapshot's format and reading it with its journal
//	journal.go  the journal's records: framing, parsing (a torn last record dropped),
//	            replay, and the change of an entry since it was written
//	ledgerwrite.go
//	            writing: one fsync'd record appended per write, compaction at start and
//	            past a size
//	choices.go  the sticky choices of Spread and MostFreeMemory, on disk
//	desiredstate.go
//	            the last desired state, on disk: a restart while the API is away enforces it
//
// Beside the engine: the read-only view of its last pass (view.go), the inspect endpoint's
// description of a pod (inspect.go), the engine's metrics (metrics.go) and the effect
// metrics read at scrape time (effect.go), and the status entries of this node (report.go).
//
// Containers' cgroups and tasks come from package cgroups; the kernel's preferred-node
// backend from package prctl (internal/numa/prctl), its /proc from package numa. The
// engine takes them, and its clock, through EngineConfig, so its tests run it on fakes
// (the unit tier) as well as on real cgroups, processes and the kernel emulator (the host
// tier, build tag host).
package nodeagent

// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

// Package nodeagent is what the agent does on its node between the API and the kernel:
// its Engine gives each selected container's tasks the NUMA node the desire names (package
// desire decides it from the API), keeps it as tasks come and go, and undoes it when a
// container is no longer selected.
//
// The Engine is a composition of owners, each of which keeps one part of what lasts from
// pass to pass, and it runs the passes. Each pass is a value (kueue's scheduler builds a
// fresh snapshot per cycle the same way): it plans (package plan, which cannot set, record
// or undo: it gets views and copies of the owners' state and returns a plan), then the
// engine applies the plan. Only the engine SETs, records and undoes.
//
//	engine.go   the Engine and its config, NewEngine, SetDesired/Results/Changes/Drain
//	            and the loop (Start): a full pass on every desired-state change and
//	            rescan tick, a fork pass on every fork event
//	pass.go     the pass kinds (full, fork, start), a pass's own state, the three passes,
//	            planning's input from the owners, and finishing a pass
//	apply.go    applying a plan: the ledger's records, the write ahead, the SETs, undo
//	            and restore
//	bracket.go  the checks around every SET: the task is still the one identified (its
//	            pidfd, or its start time) and still in the container, before and after
//	desires.go  the desire owner: the API's desired state, the starts PlaceAtStart
//	            announces and their grace, generations, the API's reachability, draining
//	desiredstate.go
//	            the last desired state, on disk: a restart while the API is away enforces it
//	start.go    placing a container at its start (PlaceAtStart, SetAPIReachable): the
//	            start lane, which waits for no pass, and its notes for the next pass
//	forktracker.go
//	            the fork tracker: the listed processes, the last listings, the tasks fork
//	            passes set before their events, lost events, the looks again
//	fork.go     fork events, looking again for a child not yet in its cgroup, the tasks a
//	            fork pass trusts, the fork-to-SET lag
//	forkfilter.go
//	            the kernel's filter of fork events kept in step with the listings: only
//	            forks of listed processes, or of ones born after the last-pid mark, wake
//	            the agent
//	placements.go
//	            the placement memory: sticky choices, the last resolutions, the topology,
//	            how each container was placed
//	choices.go  the sticky choices of Spread and MostFreeMemory, on disk
//	topology.go when the online nodes and CPUs are read again (hotplug)
//	placedat.go how each container was first placed (at its start, after it, before the
//	            agent's restart) and the time from its start to then
//	published.go
//	            the last pass's results and listings, for readers, under their own lock
//	share.go    one container's share of the ledger and pidfds (TooManyTasks)
//
// Beside the engine: the read-only view of its last pass (view.go), the inspect endpoint's
// description of a pod (inspect.go), how the engine observes its metrics (metrics.go) and
// the effect metrics read at scrape time (effect.go), both defined in internal/metrics,
// and the status entries of this node (report.go).
//
// The packages under it: desire (API → desire, pure), known (the ledger's data and its
// read-only view), ledger (the Store: what the agent set, on disk, written ahead of every
// SET), plan (deciding), cgroups (containers' cgroups and tasks) and nri (the runtime's
// plugin). The kernel's preferred-node backend is package prctl's (internal/numa/prctl),
// its /proc readers package numa's. The engine takes the host, and its clock, through
// EngineConfig, so its tests run it on fakes (the unit tier) as well as on real cgroups,
// processes and the kernel emulator (the host tier, build tag host).
package nodeagent

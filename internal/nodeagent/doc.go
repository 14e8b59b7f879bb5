// Package nodeagent is what the agent does on its node between the API and the kernel:
// it decides which NUMA node each container of the node's pods should prefer (PlanPod,
// desired.go), and its Engine gives that node to every task of those containers, keeps it
// as tasks come and go, and undoes it when a container is no longer selected.
//
// The engine's files follow its jobs:
//
//	engine.go   the Engine, its config, SetDesired/Results/Changes and the loop (Start):
//	            a pass on every desired-state change and rescan tick, and a one-container
//	            pass on every fork event
//	plan.go     planning one container's SETs: cgroup, cpuset, each task's GET
//	apply.go    the SETs, undo and restore
//	bracket.go  the checks around every SET: the task is still the one identified (its
//	            pidfd, or its start time) and still in the container, before and after
//	fork.go     fork events, looking again for a child not yet in its cgroup, the tasks a
//	            fork pass trusts, the fork-to-SET lag
//	ledger.go   what the agent set, on disk, written ahead of every SET (no SET when the
//	            write fails)
//	desiredstate.go
//	            the last desired state, on disk: a restart while the API is away enforces it
//
// Beside the engine: the read-only view of its last pass (view.go), the inspect endpoint's
// description of a pod (inspect.go), the engine's metrics (metrics.go) and the effect
// metrics read at scrape time (effect.go), and the status entries of this node (report.go).
//
// Containers' cgroups and tasks come from package cgroups; the kernel (the preferred-node
// backend, /proc) from package numa. The engine takes both, and its clock, through
// EngineConfig, so its tests run it on fakes (the unit tier) as well as on real cgroups,
// processes and the kernel emulator (the host tier, build tag host).
package nodeagent

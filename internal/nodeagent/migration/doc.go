// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

// Package migration owns the moving of running containers' pages to their home node, off
// every path a container start or a reconcile waits on.
//
// A caller submits a Request per container (its key, its processes, the home node and the
// nodes to move from) and the Worker moves the pages on a goroutine of its own, one step at
// a time:
//   - A step is a bounded run of one process's address space (migrate.Mover, over
//     move_pages(2)): at most Options.Step pages found on the source nodes, and a bounded
//     number of addresses looked at. migrate_pages(2) would move a whole process in one
//     call, and a process of millions of pages would hold its memory and the rate for
//     seconds; steps spread it.
//   - Steps go round robin across the containers, so a large container's move takes many
//     turns while the others' go on between them.
//   - A token bucket bounds the pages per second (Options.Rate, Options.Burst); a step
//     costs the pages it found plus its addresses over Options.ScanCost. Options.MaxBusy
//     bounds the share of time spent in the kernel's copies.
//   - One step runs at a time.
//
// Outcomes:
//   - A process that is gone is skipped; a container all of whose processes are gone ends
//     (ReasonGone).
//   - A refusal the request cannot outgrow ends it at once: no right to the process
//     (ReasonPermissionDenied), a target outside its cpuset.mems (ReasonPinned).
//   - Any other error is tried again with exponential backoff, and ends the request after
//     Options.Attempts errors in a row (ReasonFailed).
//   - Pages that do not move (the home node full, pages busy) are counted once per pass
//     over the container. The pass is tried again only after Options.StayedBackoff (which
//     doubles), at most Options.StayedRetries times, or when the request changes; then the
//     request ends (ReasonPagesStayed). There is no retry storm.
//   - A request for a key that has one replaces it (ReasonReplaced) unless it asks the
//     same; the same request again changes nothing, whatever its state, so a caller may
//     resubmit on every pass. Cancel ends one (ReasonCancelled).
//
// The caller sees counts through Metrics (a small interface it implements) and each key's
// progress through Status. The clock is injected (Clock), so the tests run on a fake one.
package migration

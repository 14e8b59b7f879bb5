// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

// Package ledger is the agent's memory of what it set, kept on the host so that an agent
// restarted after a crash or an upgrade can still undo its work. Entries are written
// before the kernel call they describe (write-ahead), and a pass whose write fails issues
// none of its SETs: after a crash the ledger may name a value the agent never set, which
// undo then finds absent and leaves alone; it never misses a value the agent did set.
//
// Task ids and start times name tasks of one boot only, so the file records the boot it
// was written in; a ledger from an earlier boot names no living task and is dropped.
//
// The durability contract: the ledger survives the agent's death (kill -9, OOM, a panic),
// not the host's. A record reaches the page cache (its write returns) before the SETs it
// describes; only a compaction's snapshot and journal header are fsync'd (written
// atomically); the boot id is checked before the journal is read, so a journal a host
// crash may have left half on disk is never read. A host crash ends every task the ledger
// names, so nothing it held needs undoing after it. (On a host whose boot id cannot be
// read, the check is skipped, and a journal damaged by a host crash reads as damaged.)
//
// A Store owns the ledger: its entries in memory (package known's data), the snapshot
// file and its journal, their bound and the boot id. Every change is one of its methods
// (Record, Forget, and the outcomes of SETs and undos), each of which notes what it
// touches, so that Write, which appends one record of what changed since the last write,
// can never miss a change. Planning reads the ledger through View and cannot change it.
//
//	store.go   the Store: Open (stale temporary files, the boot check before the
//	           journal is trusted, compaction at start), its changes, Write
//	file.go    the snapshot's format, its checksum and versions, and reading it (Read)
//	journal.go the journal's records: framing, parsing (a torn last record dropped),
//	           replay, and the change of an entry since it was written
//	write.go   appending to the journal, and compaction (at start, past a size, at the
//	           bound)
package ledger

// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package ledger

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"slices"

	"github.com/numapref/numapref/internal/fsutil"
	"github.com/numapref/numapref/internal/nodeagent/desire"
	"github.com/numapref/numapref/internal/nodeagent/known"
)

// Writing the ledger: a record appended to the journal (journal.go) per write, and a
// compaction, the whole ledger in a new snapshot and an empty journal, at start, when the
// journal grows past the snapshot's size (CompactPastSize, which the engine calls at the
// end of a full pass, never on the fork path), and when an append would take the two files
// past the ledger's bound.

// CompactMin is the size past which CompactPastSize compacts the journal, unless the
// snapshot is larger or Options say another: compacting then costs no more than the
// appends it folds in.
const CompactMin = 256 << 10

// journal is the store's open journal and what the files on disk say.
type journal struct {
	// f is the journal, open for appending; nil when the next write must compact (none
	// yet, or the last write or compaction failed: a half-written record may be in it).
	f *os.File
	// snap and file are the snapshot and the journal as the last compaction left them: a
	// write checks that they are still the files there (not replaced, by a link say).
	snap, file fs.FileInfo
	// size and snapSize are the sizes of the journal and the snapshot, in bytes.
	size, snapSize int
	// disk is the ledger the snapshot and the journal hold together, a copy: the store's
	// own entries change in place.
	disk known.Containers
	// touched are the containers whose entries may have changed since the last write, and
	// in each, what may have (Store.touch).
	touched map[desire.ContainerKey]*touched
}

// touched is what may have changed in one container's entry since the last write: all of
// it, or the tasks tids.
type touched struct {
	all  bool
	tids map[int]bool
}

// changes is the record of what changed in the touched entries of l since the journal
// last wrote them, in a stable order.
func (j *journal) changes(l known.Containers) journalRecord {
	keys := make([]desire.ContainerKey, 0, len(j.touched))
	for k := range j.touched {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b desire.ContainerKey) int {
		return cmp.Or(cmp.Compare(a.PodUID, b.PodUID), cmp.Compare(a.Container, b.Container))
	})
	var rec journalRecord
	for _, k := range keys {
		var c *containerChange
		if t := j.touched[k]; t.all {
			c = diffEntries(k, l[k], j.disk[k])
		} else {
			c = diffTasks(k, l[k], j.disk[k], t.tids)
		}
		if c != nil {
			rec.Changes = append(rec.Changes, *c)
		}
	}
	return rec
}

// appendFrame appends frame to the journal: the write ahead of a SET. Once write returns
// the record is in the page cache, where it outlives the agent's death (kill -9, OOM, a
// panic); it is not fsync'd, since a host crash ends every task it names and the next
// boot drops the ledger unread (the durability contract, doc.go).
func (s *Store) appendFrame(frame []byte) error {
	j := &s.j
	s.step("append", frame)
	if _, err := j.f.Write(frame); err != nil {
		return err
	}
	s.step("written", frame)
	j.size += len(frame)
	return nil
}

// step runs the crash tests' hook at a step of a write.
func (s *Store) step(step string, frame []byte) {
	if s.opts.Step != nil {
		s.opts.Step(step, s.j.f, frame)
	}
}

// intact says whether the snapshot and the journal on disk are still the files the
// journal's last compaction left (a link or another file put in their place is not, even
// one given the same inode number): the snapshot unchanged since, the journal regular and
// of the size this store wrote.
func (j *journal) intact(ledgerPath string) bool {
	snap, err := os.Lstat(ledgerPath)
	if err != nil || !snap.Mode().IsRegular() || !os.SameFile(snap, j.snap) ||
		snap.Size() != j.snap.Size() || !snap.ModTime().Equal(j.snap.ModTime()) {
		return false
	}
	file, err := os.Lstat(journalPath(ledgerPath))
	return err == nil && file.Mode().IsRegular() && os.SameFile(file, j.file) && file.Size() == int64(j.size)
}

func (j *journal) close() {
	if j.f != nil {
		j.f.Close()
		j.f = nil
	}
}

// compact writes the whole ledger in a new snapshot, then an empty journal that continues
// it (its header names the snapshot's new generation). A crash between the two renames
// leaves the new snapshot beside the old journal, whose generation tells it stale. The
// ledger is refused past its bound (errFull).
func (s *Store) compact() error {
	j := &s.j
	j.close()
	gen := rand.Uint64() | 1 // never 0, which means no journal
	f := ledgerFile{BootID: s.opts.BootID, Journal: gen, Containers: s.live.Sorted()}
	data, err := encodeLedgerFile(f)
	if err != nil {
		return err
	}
	header, err := encodeFrame(journalRecord{Gen: gen})
	if err != nil {
		return err
	}
	if len(data)+len(header) > s.opts.Limit { // the bound is of both files
		return fmt.Errorf("writing ledger %s: %d bytes for %d containers, refused: %w of %d bytes",
			s.path, len(data)+len(header), len(f.Containers), errFull, s.opts.Limit)
	}
	if err := fsutil.WriteFileAtomic(s.path, data, 0o600); err != nil {
		return fmt.Errorf("writing ledger: %w", err)
	}
	s.step("snapshot", nil)
	if err := fsutil.WriteFileAtomic(journalPath(s.path), header, 0o600); err != nil {
		return fmt.Errorf("writing ledger journal: %w", err)
	}
	if err := j.open(s.path); err != nil {
		return err
	}
	j.snapSize = len(data)
	j.disk = s.live.Clone()
	s.written()
	return nil
}

// open opens the journal beside the ledger at ledgerPath for appending, and notes which
// files the two are.
func (j *journal) open(ledgerPath string) error {
	path := journalPath(ledgerPath)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return fmt.Errorf("opening ledger journal: %w", err)
	}
	file, err := f.Stat()
	if err == nil {
		j.snap, err = os.Lstat(ledgerPath)
	}
	if err != nil {
		f.Close()
		return fmt.Errorf("opening ledger journal: %w", err)
	}
	j.f, j.file, j.size = f, file, int(file.Size())
	if !j.intact(ledgerPath) { // replaced while it was opened
		j.close()
		return fmt.Errorf("opening ledger journal %s: replaced while it was opened", path)
	}
	return nil
}

// compactAtStart compacts the ledger read at start, if there are files: an upgraded
// agent's older ledger then takes this version's form, a torn or stale journal is gone,
// and the journal starts empty. With no file yet, the first write compacts.
func (s *Store) compactAtStart() {
	for _, path := range []string{s.path, journalPath(s.path)} {
		if _, err := os.Lstat(path); errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err := s.compact(); err != nil {
			s.opts.Log.Error(err, "Compacting the ledger at start; the next write tries again")
		}
		return
	}
}

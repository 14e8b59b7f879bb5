// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package ledger

import (
	"fmt"
	"maps"
	"os"
	"sync"

	"github.com/go-logr/logr"

	"github.com/numapref/numapref/internal/fsutil"
	"github.com/numapref/numapref/internal/nodeagent/desire"
	"github.com/numapref/numapref/internal/nodeagent/known"
)

// Options are a Store's settings.
type Options struct {
	// Limit bounds the snapshot and the journal together, in bytes (0: DefaultLimit).
	Limit int
	// CompactAt is the journal's size past which CompactPastSize compacts it, unless the
	// snapshot is larger (0: CompactMin).
	CompactAt int
	// BootID is the kernel's boot id ("" if unknown). The snapshot records it: a ledger of
	// another boot names no living task, and Open drops it.
	BootID string
	Log    logr.Logger
	// Step, when not nil, runs at the steps of a write, for the crash tests: "append"
	// before a record's write to the journal f, "written" after it (before the SETs it
	// allows), "snapshot" when a compaction's new snapshot is in place and its journal
	// not yet.
	Step func(step string, f *os.File, frame []byte)
}

func (o Options) withDefaults() Options {
	if o.Limit <= 0 {
		o.Limit = DefaultLimit
	}
	if o.CompactAt <= 0 {
		o.CompactAt = CompactMin
	}
	return o
}

// Store is the ledger: what the agent set, in memory and on disk. Every change goes
// through its methods, which note the container they touch, so the next Write finds
// every change since the last one: a value is never set without its entry on disk
// because a change was made behind the store's back.
//
// Its methods lock it, so two writers may use it at once: the engine's passes, one at a
// time, and its start lane (a container placed at its start, which waits for no pass).
// A pass reads entries through a View without the lock and changes them in place through
// the methods; the start lane reads an entry through Entry (a copy) and changes it only
// through Replace, which puts a changed copy in its place: so an entry a pass's view holds
// is never changed under it but by that pass.
type Store struct {
	mu   sync.Mutex
	path string // "" keeps the ledger in memory only
	opts Options
	live known.Containers
	j    journal
	// dirty says the ledger changed since the last write.
	dirty bool
}

// Open reads the ledger at path and its journal, first removing what writes killed
// mid-way left beside them, and compacts them. A ledger of another boot is dropped
// before its journal is read: nothing is undone from it. A missing file is an empty
// ledger; a damaged one (ErrDamaged) yields what could be read, beside the error, and a
// working store. An empty path keeps the ledger in memory only.
func Open(path string, opts Options) (*Store, error) {
	s := &Store{path: path, opts: opts.withDefaults(), live: known.Containers{}}
	if path == "" {
		return s, nil
	}
	s.removeStaleTemps()
	err := s.load()
	s.compactAtStart()
	return s, err
}

// load reads the files into the store, checking the snapshot's boot before its journal.
func (s *Store) load() error {
	f, err := loadSnapshot(s.path, s.opts.Limit)
	if err != nil {
		return err
	}
	if f.BootID != "" && s.opts.BootID != "" && f.BootID != s.opts.BootID {
		s.opts.Log.Info("The ledger was written before the host rebooted: its tasks are gone, dropping it",
			"ledgerBootID", f.BootID, "bootID", s.opts.BootID, "containers", len(f.Containers))
		s.dirty = true
		return nil
	}
	f, note, err := readJournal(s.path, s.opts.Limit, f)
	s.logJournal(note)
	s.live = f.containers()
	return err
}

// removeStaleTemps removes the temporary files killed writes of the ledger and its
// journal left.
func (s *Store) removeStaleTemps() {
	for _, path := range []string{s.path, journalPath(s.path)} {
		if n, err := fsutil.RemoveStaleTemps(path); err != nil {
			s.opts.Log.Error(err, "Removing stale temporary files", "file", path)
		} else if n > 0 {
			s.opts.Log.Info("Removed temporary files a killed write left", "file", path, "files", n)
		}
	}
}

// logJournal says what the start found in the journal.
func (s *Store) logJournal(note journalNote) {
	if note.torn > 0 {
		s.opts.Log.Info("Dropped the ledger journal's torn last record: a write cut short by the agent's death, whose SETs were never issued",
			"bytes", note.torn)
	}
	if note.stale {
		s.opts.Log.V(1).Info("Ignored a ledger journal its snapshot already holds (a compaction was killed between its renames)")
	}
	s.opts.Log.V(2).Info("Read the ledger journal", "changes", note.records)
}

// View is a read-only view of the ledger: of its entries as they are, in a map of its own
// (so the start lane's Replace does not change it). An entry it holds changes when the
// holder's own pass changes it.
func (s *Store) View() known.View {
	s.mu.Lock()
	defer s.mu.Unlock()
	return known.NewView(maps.Clone(s.live))
}

// Entry is a view of a copy of container key's entry alone, for a reader that holds no
// pass (the start lane).
func (s *Store) Entry(key desire.ContainerKey) known.View {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := known.Containers{}
	if e := s.live[key]; e != nil {
		c[key] = e.Clone()
	}
	return known.NewView(c)
}

// Replace makes change to a copy of container key's entry (a new one if there is none)
// and puts the copy in its place: the start lane's way to change the ledger, which
// changes no entry a pass's view holds.
func (s *Store) Replace(key desire.ContainerKey, change func(c *known.Container)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.touch(key)
	c := &known.Container{PodUID: string(key.PodUID), Container: key.Container, Tasks: map[int]*known.Task{}}
	if e := s.live[key]; e != nil {
		c = e.Clone()
	}
	change(c)
	s.live[key] = c
}

// Len is the number of containers the ledger holds.
func (s *Store) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.live)
}

// Dirty says whether the ledger changed since its last write.
func (s *Store) Dirty() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.dirty
}

// touch notes that the entry of key changes as a whole (created, its container ID, gone,
// its tasks replaced): the next write compares all of it with what is on disk. touchTask
// notes that only task tid of it changes, so that the next write compares that task alone:
// a fork's write costs the same however many tasks the container has. Every method that
// changes the ledger calls one of them.
func (s *Store) touch(key desire.ContainerKey) {
	s.touched(key).all = true
}

func (s *Store) touchTask(key desire.ContainerKey, tid int) {
	t := s.touched(key)
	if t.all {
		return
	}
	if t.tids == nil {
		t.tids = map[int]bool{}
	}
	t.tids[tid] = true
}

// touched is the record of what changes in the entry of key until the next write.
func (s *Store) touched(key desire.ContainerKey) *touched {
	if s.j.touched == nil {
		s.j.touched = map[desire.ContainerKey]*touched{}
	}
	t := s.j.touched[key]
	if t == nil {
		t = &touched{}
		s.j.touched[key] = t
	}
	s.dirty = true
	return t
}

// written notes a successful write: what is on disk is the ledger.
func (s *Store) written() {
	clear(s.j.touched)
	s.dirty = false
}

// Record makes a planned change to the entry of container key, creating it if there is
// none. rerun says the entry was of the same container under another container ID: it
// runs again.
func (s *Store) Record(key desire.ContainerKey, c known.Change) (rerun bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	entry := s.live[key]
	switch {
	case entry == nil:
		entry = &known.Container{PodUID: string(key.PodUID), Container: key.Container, Tasks: map[int]*known.Task{}}
		s.live[key] = entry
		s.touch(key)
	case entry.Ref != c.Ref:
		s.touch(key)
		rerun = entry.Ref.ContainerID != c.Ref.ContainerID && !desire.SameContainer(entry.Ref.ContainerID, c.Ref.ContainerID)
	}
	for tid := range c.Put {
		s.touchTask(key, tid)
	}
	for _, tid := range c.Forget {
		s.touchTask(key, tid)
	}
	entry.Apply(c)
	if len(c.Put) == 0 && len(c.Forget) == 0 {
		s.touched(key) // nothing changes, but the write still says so
	}
	return rerun
}

// Forget drops the entry of container key: undone, or its cgroup gone.
func (s *Store) Forget(key desire.ContainerKey) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.touch(key)
	delete(s.live, key)
}

// DropTask forgets task tid of container key: it exited or left the container, or its
// id names another task now.
func (s *Store) DropTask(key desire.ContainerKey, tid int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.touchTask(key, tid)
	if entry := s.live[key]; entry != nil {
		delete(entry.Tasks, tid)
	}
}

// TakeValue takes node off the values task tid of container key may hold: the kernel
// refused to set it.
func (s *Store) TakeValue(key desire.ContainerKey, tid, node int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.touchTask(key, tid)
	if entry := s.live[key]; entry != nil {
		entry.TakeValue(tid, node)
	}
}

// Confirm records that task tid of container key holds node, set by the agent and
// confirmed: the only value it may hold.
func (s *Store) Confirm(key desire.ContainerKey, tid, node int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.touchTask(key, tid)
	if entry := s.live[key]; entry != nil {
		entry.Confirm(tid, node)
	}
}

// KeepTasks makes tasks the entry's tasks: those of a container an undo could not
// finish (the kernel refused them), kept to be tried again.
func (s *Store) KeepTasks(key desire.ContainerKey, tasks map[int]*known.Task) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.touch(key)
	if entry := s.live[key]; entry != nil {
		entry.Tasks = make(map[int]*known.Task, len(tasks))
		for tid, t := range tasks {
			entry.Tasks[tid] = t.Clone()
		}
	}
}

// Write writes what changed in the ledger since its last write, if it has a file: one
// record appended to the journal, or a compaction when the journal cannot be appended to
// (none open, the files replaced, the bound reached). It is the write ahead
// of the SETs of a pass, and the write of their outcomes.
func (s *Store) Write() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.path == "" {
		s.written()
		return nil
	}
	j := &s.j
	if j.f == nil || !j.intact(s.path) {
		return s.compact()
	}
	rec := j.changes(s.live)
	if len(rec.Changes) == 0 {
		s.written()
		return nil
	}
	frame, err := encodeFrame(rec)
	if err != nil {
		return err
	}
	if j.snapSize+j.size+len(frame) > s.opts.Limit {
		return s.compact() // the exact size, and the bound, are the snapshot's
	}
	if err := s.appendFrame(frame); err != nil {
		j.close()
		return fmt.Errorf("writing ledger journal %s: %w", journalPath(s.path), err)
	}
	for i := range rec.Changes {
		applyChange(j.disk, &rec.Changes[i])
	}
	s.written()
	return nil
}

// CompactPastSize compacts the ledger when the journal has grown past the snapshot's size
// (and Options.CompactAt).
func (s *Store) CompactPastSize() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	j := &s.j
	if s.path == "" || j.f == nil || j.size <= max(s.opts.CompactAt, j.snapSize) {
		return nil
	}
	return s.compact()
}

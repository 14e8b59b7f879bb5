// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build linux

package emulator

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/numapref/numapref/internal/fsutil"
	"github.com/numapref/numapref/internal/numa"
)

// emulatorMeta is the machine-wide part of the emulated kernel state (meta.json).
type emulatorMeta struct {
	// BootID is the kernel's boot_id when the state was made: a reboot wipes kernel state,
	// so a different boot id wipes the emulator's.
	BootID string `json:"bootId"`
	// FirstForcedAt is the clock tick (after boot) of the first SET of a node. A task that
	// started before it cannot have inherited a forced node. 0: nothing was ever forced.
	FirstForcedAt uint64 `json:"firstForcedAt"`
	// AssumedFresh counts tasks given -1 because the emulator could not tell how they were
	// made.
	AssumedFresh uint64 `json:"assumedFresh"`
	// Inherited counts tasks whose value was copied from their creator.
	Inherited uint64 `json:"inherited"`
}

// store is the emulator's state directory:
//
//	lock                 flock'ed exclusively around every change (one writer at a time)
//	meta.json            emulatorMeta
//	listener             the fork-event listener's shared page (see listener)
//	proc/<tgid>/task/<tid>/sched
//	                     one taskEntry per task, shaped like (and placed as) the kernel's
//	                     /proc/<tgid>/task/<tid>/sched
//
// Every file is replaced by rename, so readers need no lock and never see half a file.
type store struct {
	dir      string
	fileMode os.FileMode
	dirMode  os.FileMode

	mu   sync.Mutex // flock excludes other processes, mu other goroutines
	lock *os.File
}

func openStore(dir string, shared bool) (*store, error) {
	s := &store{dir: dir, fileMode: 0o644, dirMode: 0o755}
	if shared {
		s.fileMode, s.dirMode = 0o666, 0o777
	}
	if err := s.mkdir(dir); err != nil {
		return nil, fmt.Errorf("creating emulator state directory: %w", err)
	}
	if err := s.mkdir(filepath.Join(dir, "proc")); err != nil {
		return nil, fmt.Errorf("creating emulator state directory: %w", err)
	}
	lock, err := openCreate(filepath.Join(dir, "lock"), s.fileMode)
	if err != nil {
		return nil, fmt.Errorf("opening emulator lock: %w", err)
	}
	s.lock = lock
	return s, nil
}

// openCreate opens path for flock, creating it if it is missing. Read access is enough
// for flock, so a process that may not write the directory can still take the lock.
func openCreate(path string, mode os.FileMode) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, mode)
	if err == nil {
		_ = f.Chmod(mode) // past the umask
		return f, nil
	}
	return os.Open(path)
}

func (s *store) close() error { return s.lock.Close() }

// mkdir creates dir (and missing parents) with the store's mode, past the umask.
func (s *store) mkdir(dir string) error {
	if fi, err := os.Stat(dir); err == nil && fi.IsDir() {
		return nil
	}
	if err := os.MkdirAll(dir, s.dirMode); err != nil {
		return err
	}
	return os.Chmod(dir, s.dirMode)
}

// withLock runs fn while holding the state lock.
func (s *store) withLock(fn func() error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := flockRetry(int(s.lock.Fd()), unix.LOCK_EX); err != nil {
		return fmt.Errorf("locking emulator state: %w", err)
	}
	// An unlock that fails leaves the lock to the file's close; fn's result is the answer.
	defer func() { _ = flockRetry(int(s.lock.Fd()), unix.LOCK_UN) }()
	return fn()
}

func flockRetry(fd, how int) error {
	for {
		err := unix.Flock(fd, how)
		if err != unix.EINTR {
			return err
		}
	}
}

// writeFile replaces path atomically: a new file in the same directory, renamed over it.
func (s *store) writeFile(path string, data []byte) error {
	tmp := fmt.Sprintf("%s.tmp-%d-%d", filepath.Join(filepath.Dir(path), "."+filepath.Base(path)), os.Getpid(), tmpSeq.Add(1))
	if err := writeNewFile(tmp, data, uint32(s.fileMode)); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// tmpSeq numbers temporary files within the process; with the pid, the names are unique.
var tmpSeq atomic.Uint64

func (s *store) readMeta() (emulatorMeta, error) {
	var m emulatorMeta
	data, err := fsutil.ReadFileInto(filepath.Join(s.dir, "meta.json"), nil)
	if errors.Is(err, fs.ErrNotExist) {
		return m, nil
	}
	if err != nil {
		return m, fmt.Errorf("reading emulator meta: %w", err)
	}
	if err := json.Unmarshal(data, &m); err != nil {
		return m, fmt.Errorf("reading emulator meta: %w", err)
	}
	return m, nil
}

// writeMeta must be called with the lock held.
func (s *store) writeMeta(m emulatorMeta) error {
	data, err := json.Marshal(m)
	if err != nil {
		return err
	}
	return s.writeFile(filepath.Join(s.dir, "meta.json"), append(data, '\n'))
}

// updateMeta applies fn to the meta under the lock held by the caller.
func (s *store) updateMeta(fn func(*emulatorMeta)) error {
	m, err := s.readMeta()
	if err != nil {
		return err
	}
	before := m
	fn(&m)
	if m == before {
		return nil
	}
	return s.writeMeta(m)
}

// processDir is proc/<tgid>; groupDir its task directory, which lists the group's entries.
func (s *store) processDir(tgid int) string {
	return filepath.Join(s.dir, "proc", strconv.Itoa(tgid))
}

func (s *store) groupDir(tgid int) string { return filepath.Join(s.processDir(tgid), "task") }

func (s *store) entryPath(tgid, tid int) string {
	return filepath.Join(s.groupDir(tgid), strconv.Itoa(tid), "sched")
}

// ViewedForce is the forced preferred node that the emulator whose state directory is
// stateDir shows for task, of thread group tgid, in its read-only view: numa.NoNode when
// the view has no entry for the task, or only an earlier task's under the same tid (another
// start time). For readers of a view mounted elsewhere, as a workload's own check.
func ViewedForce(stateDir string, tgid int, task numa.Task) (int, error) {
	e, ok, err := (&store{dir: stateDir}).readEntry(tgid, task.TID)
	if err != nil || !ok || e.Start != task.StartTime {
		return numa.NoNode, err
	}
	return e.Force, nil
}

// readEntry returns the entry of tid in thread group tgid, if there is one.
func (s *store) readEntry(tgid, tid int) (taskEntry, bool, error) {
	data, err := fsutil.ReadFileInto(s.entryPath(tgid, tid), nil)
	if errors.Is(err, fs.ErrNotExist) {
		return taskEntry{}, false, nil
	}
	if err != nil {
		return taskEntry{}, false, fmt.Errorf("reading emulator entry of task %d: %w", tid, err)
	}
	e, err := parseTaskEntry(string(data))
	if err != nil || e.TID != tid || e.TGID != tgid {
		// A damaged entry is as good as none: the task is then treated as unknown.
		return taskEntry{}, false, nil
	}
	return e, true, nil
}

// hasGroup reports whether any task of thread group tgid has an entry.
func (s *store) hasGroup(tgid int) bool {
	_, err := os.Stat(s.processDir(tgid))
	return err == nil
}

// writeEntry must be called with the lock held.
func (s *store) writeEntry(e taskEntry) error {
	path := s.entryPath(e.TGID, e.TID)
	err := s.writeFile(path, e.format())
	if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	for _, dir := range []string{s.processDir(e.TGID), s.groupDir(e.TGID), filepath.Dir(path)} {
		if err := s.mkdir(dir); err != nil {
			return fmt.Errorf("writing emulator entry of task %d: %w", e.TID, err)
		}
	}
	return s.writeFile(path, e.format())
}

// removeEntry must be called with the lock held. The directories go with their last entry.
func (s *store) removeEntry(tgid, tid int) error {
	path := s.entryPath(tgid, tid)
	err := os.Remove(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("removing emulator entry of task %d: %w", tid, err)
	}
	// Each fails while something remains in it.
	_ = os.Remove(filepath.Dir(path))
	_ = os.Remove(s.groupDir(tgid))
	_ = os.Remove(s.processDir(tgid))
	return nil
}

// groupEntries returns the entries of thread group tgid, by tid.
func (s *store) groupEntries(tgid int) ([]taskEntry, error) {
	names, err := readDirNames(s.groupDir(tgid))
	if err != nil {
		return nil, err
	}
	var entries []taskEntry
	for _, name := range names {
		tid, err := strconv.Atoi(name)
		if err != nil {
			continue
		}
		if e, ok, err := s.readEntry(tgid, tid); err != nil {
			return nil, err
		} else if ok {
			entries = append(entries, e)
		}
	}
	return entries, nil
}

// groups returns the thread groups that have entries.
func (s *store) groups() ([]int, error) {
	names, err := readDirNames(filepath.Join(s.dir, "proc"))
	if err != nil {
		return nil, err
	}
	var tgids []int
	for _, name := range names {
		if tgid, err := strconv.Atoi(name); err == nil {
			tgids = append(tgids, tgid)
		}
	}
	return tgids, nil
}

// wipe removes every entry and the meta; it must be called with the lock held.
func (s *store) wipe() error {
	tasks := filepath.Join(s.dir, "proc")
	names, err := readDirNames(tasks)
	if err != nil {
		return err
	}
	for _, name := range names {
		if err := os.RemoveAll(filepath.Join(tasks, name)); err != nil {
			return fmt.Errorf("wiping emulator state: %w", err)
		}
	}
	err = os.Remove(filepath.Join(s.dir, "meta.json"))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("wiping emulator state: %w", err)
	}
	return nil
}

// readDirNames lists dir without temporary files; a missing dir is empty.
func readDirNames(dir string) ([]string, error) {
	f, err := os.Open(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("listing %s: %w", dir, err)
	}
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		return nil, fmt.Errorf("listing %s: %w", dir, err)
	}
	names = slices.DeleteFunc(names, func(n string) bool { return strings.HasPrefix(n, ".") })
	slices.Sort(names)
	return names, nil
}

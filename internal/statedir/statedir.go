// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

// Package statedir is the layout of the agent's state directory, and the one place that
// names its files: the lock (one agent per dir), the ledger and its journal (what the
// agent set), the sticky placement choices, the last desired state and, with NRI, the
// NumaPreferences last seen. It takes the dir (Hold), moves an earlier version's state
// into it (Adopt) and removes it after a drain (Remove). What each file holds is its
// store's business.
package statedir

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/numapref/numapref/internal/fsutil"
)

// The state files' names in their dir.
const (
	lockName        = "agent.lock"
	ledgerName      = "ledger.json"
	choicesName     = "choices.json"
	desiredName     = "desired.json"
	preferencesName = "preferences.json"
	// journalSuffix makes the journal's name from the ledger's.
	journalSuffix = ".journal"
)

// Dir is a state directory. The zero Dir is none: it adopts nothing, and nothing adopts
// from it.
type Dir struct{ path string }

// New is the state directory at path.
func New(path string) Dir { return Dir{path: path} }

// Path is the directory itself.
func (d Dir) Path() string { return d.path }

func (d Dir) String() string { return d.path }

// Lock is the lock file that makes one agent the dir's only user (Hold).
func (d Dir) Lock() string { return d.file(lockName) }

// Ledger is the snapshot of what the agent set, which undo relies on.
func (d Dir) Ledger() string { return d.file(ledgerName) }

// Journal is the ledger's journal: what changed since the snapshot.
func (d Dir) Journal() string { return JournalOf(d.Ledger()) }

// Choices holds the automatic modes' sticky choices.
func (d Dir) Choices() string { return d.file(choicesName) }

// Desired holds the desired state last handed to the engine.
func (d Dir) Desired() string { return d.file(desiredName) }

// Preferences holds the NumaPreferences last seen (with NRI).
func (d Dir) Preferences() string { return d.file(preferencesName) }

func (d Dir) file(name string) string { return filepath.Join(d.path, name) }

// JournalOf is the journal beside the ledger file at ledger.
func JournalOf(ledger string) string { return ledger + journalSuffix }

// Files lists every state file but the lock, in the order Adopt moves them: the ledger
// last, so that a crash before its move leaves this dir without one, and the next start
// adopts the rest.
func (d Dir) Files() []string {
	return []string{d.Choices(), d.Desired(), d.Preferences(), d.Journal(), d.Ledger()}
}

// Hold creates the dir (mode 0700) and takes its lock, waiting while another agent holds
// it (fsutil.WaitLock: opts.Waiting is told whom it waits for, so a caller can answer its
// health probes meanwhile), until ctx ends. Two agents on one dir would overwrite each
// other's ledger, and what the first one set would never be undone. The kernel releases
// the lock when its holder exits, SIGKILL too.
func (d Dir) Hold(ctx context.Context, opts fsutil.WaitOptions) (*fsutil.Lock, error) {
	if err := os.MkdirAll(d.path, 0o700); err != nil {
		return nil, fmt.Errorf("creating state dir: %w", err)
	}
	return fsutil.WaitLock(ctx, d.Lock(), opts)
}

// Adopt moves the state files of from, the dir an earlier version used, into d when d has
// no ledger yet, and returns the names of those it moved: an upgrade from a release whose
// agents kept their state elsewhere still undoes what they set. The caller holds d's lock;
// Adopt takes from's for as long as it moves files, and refuses, with an error wrapping
// fsutil.ErrLocked that names the holder's pid, while an agent runs on from: two agents
// must not share its tasks. A from without state files is left alone (its lock is not
// even created); the zero Dir, or d itself, adopts nothing.
func (d Dir) Adopt(from Dir) (adopted []string, err error) {
	if from.path == "" || filepath.Clean(from.path) == filepath.Clean(d.path) {
		return nil, nil
	}
	if _, err := os.Lstat(d.Ledger()); !errors.Is(err, fs.ErrNotExist) {
		return nil, nil // d has its own ledger (or an unreadable one its store reports)
	}
	if !from.holdsState() {
		return nil, nil
	}
	lock, holder, err := fsutil.TryLock(from.Lock())
	if errors.Is(err, fsutil.ErrLocked) {
		return nil, fmt.Errorf("adopting the state of %s: %w (pid %s): an agent still runs on it", from, err, pid(holder))
	}
	if err != nil {
		return nil, fmt.Errorf("adopting the state of %s: %w", from, err)
	}
	defer func() { err = errors.Join(err, lock.Release()) }()
	dst := d.Files()
	for i, src := range from.Files() {
		err := os.Rename(src, dst[i])
		switch {
		case errors.Is(err, fs.ErrNotExist):
		case err != nil:
			return adopted, fmt.Errorf("adopting %s from %s: %w", filepath.Base(src), from, err)
		default:
			adopted = append(adopted, filepath.Base(src))
		}
	}
	return adopted, nil
}

// holdsState tells whether any state file is in d (or cannot be told absent).
func (d Dir) holdsState() bool {
	for _, path := range d.Files() {
		if _, err := os.Lstat(path); !errors.Is(err, fs.ErrNotExist) {
			return true
		}
	}
	return false
}

// pid spells a lock holder's pid, 0 when the lock file names none.
func pid(holder int) string {
	if holder <= 0 {
		return "unknown"
	}
	return fmt.Sprint(holder)
}

// Remove removes the state files, the temporary files a killed write left, the lock file,
// then the dir, once a drain left nothing to undo. A lock held stays held on the removed
// file: its holder writes nothing more, and an agent that starts meanwhile locks a new
// file.
func (d Dir) Remove() error {
	var errs []error
	for _, path := range append(d.Files(), d.Lock()) {
		if _, err := fsutil.RemoveStaleTemps(path); err != nil {
			errs = append(errs, err)
		}
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	if err := os.Remove(d.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

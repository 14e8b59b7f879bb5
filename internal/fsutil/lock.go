// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package fsutil

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"k8s.io/utils/clock"
)

// ErrLocked means another process holds the lock.
var ErrLocked = errors.New("held by another process")

// Lock is an exclusive lock (flock) on a lock file, which names its holder's pid. The
// kernel releases it when the holder's file is closed, which its exit does too, SIGKILL
// included: a lock is never left behind by a dead process.
type Lock struct {
	f    *os.File
	path string
}

// TryLock takes the lock at path, creating the file, and writes this process's pid in it.
// When another process holds it, it returns ErrLocked and the holder's pid (0 if the file
// does not name one).
func TryLock(path string) (*Lock, int, error) {
	for {
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|noFollow, 0o600)
		if err != nil {
			return nil, 0, fmt.Errorf("opening lock file %s: %w", path, err)
		}
		if err := tryFlock(f); err != nil {
			f.Close()
			if errors.Is(err, ErrLocked) {
				return nil, lockHolder(path), fmt.Errorf("lock %s: %w", path, err)
			}
			return nil, 0, fmt.Errorf("locking %s: %w", path, err)
		}
		// A holder that removed the file (or a new one in its place) while this process
		// opened it leaves this process a lock on a file nobody else will open: try again.
		if same, err := stillAt(f, path); err != nil || !same {
			f.Close()
			if err != nil {
				return nil, 0, err
			}
			continue
		}
		l := &Lock{f: f, path: path}
		if err := l.writePID(); err != nil {
			f.Close()
			return nil, 0, err
		}
		return l, 0, nil
	}
}

// stillAt tells whether f is the file at path.
func stillAt(f *os.File, path string) (bool, error) {
	held, err := f.Stat()
	if err != nil {
		return false, fmt.Errorf("checking lock file %s: %w", path, err)
	}
	now, err := os.Lstat(path)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("checking lock file %s: %w", path, err)
	}
	return os.SameFile(held, now), nil
}

func (l *Lock) writePID() error {
	pid := []byte(strconv.Itoa(os.Getpid()) + "\n")
	if err := l.f.Truncate(0); err != nil {
		return fmt.Errorf("writing lock file %s: %w", l.path, err)
	}
	if _, err := l.f.WriteAt(pid, 0); err != nil {
		return fmt.Errorf("writing lock file %s: %w", l.path, err)
	}
	return nil
}

// lockHolder reads the pid a lock file names, 0 if none.
func lockHolder(path string) int {
	data, err := ReadStateFile(path, 64)
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil || pid <= 0 {
		return 0
	}
	return pid
}

// Release gives the lock up.
func (l *Lock) Release() error { return l.f.Close() }

// WaitOptions tune WaitLock.
type WaitOptions struct {
	// Poll is how often the lock is tried again (default 1 s): the longest a waiter lags
	// behind the holder's exit.
	Poll time.Duration
	// Report is how often Waiting is called again while the lock is held (default 30 s).
	Report time.Duration
	// Waiting is called when the lock is found held, and then every Report, with the
	// holder's pid (0 if unknown) and how long this process has waited.
	Waiting func(holder int, waited time.Duration)
	// Clock defaults to the real clock.
	Clock clock.Clock
}

// WaitLock takes the lock at path, waiting as long as another process holds it, until ctx
// ends.
func WaitLock(ctx context.Context, path string, opts WaitOptions) (*Lock, error) {
	if opts.Poll <= 0 {
		opts.Poll = time.Second
	}
	if opts.Report <= 0 {
		opts.Report = 30 * time.Second
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	start := opts.Clock.Now()
	var lastReport time.Time
	for {
		l, holder, err := TryLock(path)
		if !errors.Is(err, ErrLocked) {
			return l, err
		}
		now := opts.Clock.Now()
		if opts.Waiting != nil && (lastReport.IsZero() || now.Sub(lastReport) >= opts.Report) {
			opts.Waiting(holder, now.Sub(start))
			lastReport = now
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for lock %s: %w", path, ctx.Err())
		case <-opts.Clock.After(opts.Poll):
		}
	}
}

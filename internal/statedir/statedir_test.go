// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package statedir

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/numapref/numapref/internal/fsutil"
)

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

func read(path string) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return "<none>"
	}
	return string(data)
}

// The names are the on-disk layout every release shares: an agent finds the files an
// older one wrote.
func TestLayout(t *testing.T) {
	d := New("/var/lib/numapref/ns_rel")
	got := append(d.Files(), d.Lock())
	want := []string{"choices.json", "desired.json", "preferences.json", "ledger.json.journal", "ledger.json", "agent.lock"}
	for i := range want {
		want[i] = "/var/lib/numapref/ns_rel/" + want[i]
	}
	if !slices.Equal(got, want) {
		t.Errorf("files %q, want %q", got, want)
	}
	if d.Journal() != JournalOf(d.Ledger()) || d.Ledger() != want[4] || d.Choices() != want[0] ||
		d.Desired() != want[1] || d.Preferences() != want[2] || d.Journal() != want[3] {
		t.Error("a path method disagrees with Files")
	}
}

// An upgrade from a release whose agents kept their state in the shared dir moves that
// state into the release's own dir, once: a dir with its own ledger adopts nothing.
func TestAdopt(t *testing.T) {
	for name, tc := range map[string]struct {
		ownLedger           bool
		wantLedger, wantOld string
		wantAdopted         []string
	}{
		"a new dir adopts the old state": {wantLedger: "old ledger", wantOld: "<none>",
			wantAdopted: []string{"choices.json", "preferences.json", "ledger.json.journal", "ledger.json"}},
		"a dir with its own ledger keeps it": {ownLedger: true, wantLedger: "own ledger", wantOld: "old ledger"},
	} {
		t.Run(name, func(t *testing.T) {
			root := t.TempDir()
			from, d := New(root), New(filepath.Join(root, "ns_release"))
			if err := os.Mkdir(d.Path(), 0o700); err != nil {
				t.Fatal(err)
			}
			write(t, from.Ledger(), "old ledger")
			write(t, from.Choices(), "old choices")
			write(t, from.Journal(), "old journal")
			write(t, from.Preferences(), "old preferences")
			if tc.ownLedger {
				write(t, d.Ledger(), "own ledger")
			}
			adopted, err := d.Adopt(from)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(adopted, tc.wantAdopted) {
				t.Errorf("adopted %q, want %q", adopted, tc.wantAdopted)
			}
			if got := read(d.Ledger()); got != tc.wantLedger {
				t.Errorf("ledger in the release's dir = %q, want %q", got, tc.wantLedger)
			}
			if got := read(from.Ledger()); got != tc.wantOld {
				t.Errorf("ledger left in the old dir = %q, want %q", got, tc.wantOld)
			}
			if !tc.ownLedger && read(d.Choices()) != "old choices" {
				t.Errorf("choices.json was not adopted")
			}
			if !tc.ownLedger && read(d.Journal()) != "old journal" {
				t.Errorf("the ledger's journal was not adopted with it")
			}
			// The earlier dir's lock was given up: an agent may start there again.
			if _, err := os.Lstat(from.Lock()); err == nil {
				l, _, err := fsutil.TryLock(from.Lock())
				if err != nil {
					t.Fatalf("the earlier dir's lock is still held: %v", err)
				}
				_ = l.Release()
			}
		})
	}
	d := New(t.TempDir())
	write(t, d.Choices(), "own choices")
	for name, from := range map[string]Dir{"nothing": {}, "itself": New(d.Path() + "/")} {
		if adopted, err := d.Adopt(from); err != nil || adopted != nil {
			t.Errorf("adopting from %s: %q, %v", name, adopted, err)
		}
	}
}

// While an agent runs on the earlier dir (it holds that dir's lock), nothing is adopted:
// both agents would set and undo the same tasks, each unaware of the other's ledger.
func TestAdoptRefusesADirInUse(t *testing.T) {
	root := t.TempDir()
	from, d := New(root), New(filepath.Join(root, "ns_release"))
	if err := os.Mkdir(d.Path(), 0o700); err != nil {
		t.Fatal(err)
	}
	write(t, from.Ledger(), "old ledger")
	write(t, from.Choices(), "old choices")
	// A flock is held per open file, so this process's own lock excludes its Adopt.
	lock, _, err := fsutil.TryLock(from.Lock())
	if err != nil {
		t.Fatal(err)
	}
	adopted, err := d.Adopt(from)
	if !errors.Is(err, fsutil.ErrLocked) || !strings.Contains(err.Error(), "pid "+strconv.Itoa(os.Getpid())) {
		t.Errorf("Adopt from a dir in use = %v, want ErrLocked naming pid %d", err, os.Getpid())
	}
	if adopted != nil || read(from.Ledger()) != "old ledger" || read(from.Choices()) != "old choices" ||
		read(d.Ledger()) != "<none>" || read(d.Choices()) != "<none>" {
		t.Errorf("files moved from a dir in use (adopted %q)", adopted)
	}
	if err := lock.Release(); err != nil {
		t.Fatal(err)
	}
	if adopted, err := d.Adopt(from); err != nil || len(adopted) != 2 {
		t.Errorf("Adopt once the agent is gone = %q, %v; want both files", adopted, err)
	}
}

// A dir without state files is not locked, nor is a lock file made there: agents of two
// releases starting at once on a new node do not refuse each other.
func TestAdoptLeavesADirWithoutState(t *testing.T) {
	root := t.TempDir()
	from, d := New(root), New(filepath.Join(root, "ns_release"))
	if err := os.Mkdir(d.Path(), 0o700); err != nil {
		t.Fatal(err)
	}
	lock, _, err := fsutil.TryLock(from.Lock())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = lock.Release() }()
	if adopted, err := d.Adopt(from); err != nil || adopted != nil {
		t.Errorf("Adopt from a dir without state = %q, %v", adopted, err)
	}
	if adopted, err := d.Adopt(New(filepath.Join(root, "absent"))); err != nil || adopted != nil {
		t.Errorf("Adopt from a missing dir = %q, %v", adopted, err)
	}
	if _, err := os.Lstat(filepath.Join(root, "absent")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the missing dir was made: %v", err)
	}
}

func TestHold(t *testing.T) {
	d := New(filepath.Join(t.TempDir(), "a", "state"))
	lock, err := d.Hold(context.Background(), fsutil.WaitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(d.Path()); err != nil || st.Mode().Perm() != 0o700 {
		t.Errorf("state dir %v, %v; want mode 0700", st.Mode(), err)
	}
	if got := strings.TrimSpace(read(d.Lock())); got != strconv.Itoa(os.Getpid()) {
		t.Errorf("lock file names %q, want this process", got)
	}
	// A second agent waits, and is told whom it waits for.
	ctx, cancel := context.WithCancel(context.Background())
	var holders []int
	_, err = d.Hold(ctx, fsutil.WaitOptions{Poll: time.Millisecond, Waiting: func(holder int, _ time.Duration) {
		holders = append(holders, holder)
		cancel()
	}})
	if !errors.Is(err, context.Canceled) || !slices.Equal(holders, []int{os.Getpid()}) {
		t.Errorf("Hold of a held dir = %v, waiting for %v; want canceled, waiting for this process", err, holders)
	}
	if err := lock.Release(); err != nil {
		t.Fatal(err)
	}
	again, err := d.Hold(context.Background(), fsutil.WaitOptions{})
	if err != nil {
		t.Fatalf("Hold once released: %v", err)
	}
	_ = again.Release()
}

func TestRemove(t *testing.T) {
	d := New(filepath.Join(t.TempDir(), "state"))
	lock, err := d.Hold(context.Background(), fsutil.WaitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = lock.Release() }()
	for _, path := range d.Files() {
		write(t, path, "x")
	}
	write(t, filepath.Join(d.Path(), ".ledger.json.tmp-42"), "torn")
	if err := d.Remove(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(d.Path()); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the state dir is still there: %v", err)
	}
	if err := d.Remove(); err != nil {
		t.Errorf("removing it again: %v", err)
	}
	// Something else in the dir is not the agent's to remove: the dir stays, and says why.
	d = New(t.TempDir())
	write(t, d.Ledger(), "x")
	write(t, filepath.Join(d.Path(), "someone-elses"), "x")
	if err := d.Remove(); err == nil {
		t.Error("Remove of a dir with a foreign file: no error")
	}
	if read(d.Ledger()) != "<none>" || read(filepath.Join(d.Path(), "someone-elses")) != "x" {
		t.Error("Remove left a state file, or removed a foreign one")
	}
}

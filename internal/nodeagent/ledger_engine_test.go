// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package nodeagent

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"github.com/numapref/numapref/internal/statedir"
	"github.com/numapref/numapref/internal/testutil/files"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	clocktesting "k8s.io/utils/clock/testing"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
	"github.com/numapref/numapref/internal/fsutil"
	"github.com/numapref/numapref/internal/nodeagent/desire"
	"github.com/numapref/numapref/internal/nodeagent/known"
	"github.com/numapref/numapref/internal/nodeagent/ledger"
)

// Unit tests of the ledger's part in a pass, on a fake host: no SET without its ledger
// entry, the ledger's bound, links, stale temporary files and reboots.

// A pass whose write-ahead ledger write fails issues none of its SETs and reports
// LedgerError; a pass soon after retries, and sets the tasks once the write succeeds.
// (Here the ledger's directory is missing; the host tier fills a tmpfs and makes one
// read-only.)
func TestEngineSetsNothingWithoutItsLedgerEntry(t *testing.T) {
	h := newFakeHost(t)
	h.addTask(100, -1)
	h.addTask(101, -1)
	dir := filepath.Join(t.TempDir(), "state")
	m := NewMetrics()
	fc := clocktesting.NewFakeClock(time.Now())
	e := h.engine(EngineConfig{LedgerPath: filepath.Join(dir, "ledger.json"), Metrics: m, Clock: fc, RescanInterval: time.Hour})
	startEngine(t, e)
	e.SetDesired([]desire.Desire{fakeDesire(1)})
	waitFor(t, "the desire's pass", func() bool { return passStats(t, m, "full").count == 1 })

	r := e.Results()[fakeDesire(1).Key()]
	if r.Reason != numav1.ReasonLedgerError || !strings.Contains(r.Message, "ledger could not be written") {
		t.Errorf("result %s: %q; want LedgerError saying why", r.Reason, r.Message)
	}
	if v := h.snapshot(); v[100] != -1 || v[101] != -1 {
		t.Errorf("tasks hold %v after a failed ledger write, want both -1: nothing may be set", v)
	}
	if n := testutil.ToFloat64(m.LedgerErrs); n != 1 {
		t.Errorf("numapref_ledger_write_errors_total = %v, want 1", n)
	}
	if n := testutil.ToFloat64(m.Containers.WithLabelValues(numav1.ReasonLedgerError, "")); n != 1 {
		t.Errorf("numapref_containers{reason=LedgerError} = %v, want 1", n)
	}

	// The disk is back: the retry, due after ledgerRetryDelay on the engine's clock, sets both.
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the retry's timer", func() bool { return fc.Waiters() == 2 }) // and the rescan ticker
	fc.Step(ledgerRetryDelay)
	waitFor(t, "the retry set both tasks", func() bool {
		v := h.snapshot()
		return v[100] == 1 && v[101] == 1 && passStats(t, m, "full").count == 2
	})
	if r := e.Results()[fakeDesire(1).Key()]; r.Reason != numav1.ReasonApplied {
		t.Errorf("after the retry: %s (%s), want Applied", r.Reason, r.Message)
	}
	l, err := readLedger(filepath.Join(dir, "ledger.json"))
	if err != nil || l[fakeDesire(1).Key()] == nil || len(l[fakeDesire(1).Key()].Tasks) != 2 {
		t.Errorf("ledger after the retry = %v, %v; want both tasks", l, err)
	}
}

// The ledger does not grow past its bound: a pass that would make it larger sets nothing
// and says so; a ledger file past the bound is not read.
func TestEngineLedgerBound(t *testing.T) {
	h := newFakeHost(t)
	h.addTask(100, -1)
	m := NewMetrics()
	e := h.engine(EngineConfig{Metrics: m, ledgerLimit: 64})
	e.SetDesired([]desire.Desire{fakeDesire(1)})
	e.Pass()
	r := e.Results()[fakeDesire(1).Key()]
	if r.Reason != numav1.ReasonLedgerError || !strings.Contains(r.Message, "bound of 64 bytes") {
		t.Errorf("result %s: %q; want LedgerError naming the bound", r.Reason, r.Message)
	}
	if v := h.value(100); v != -1 {
		t.Errorf("task 100 holds %d, want -1", v)
	}
	if n := testutil.ToFloat64(m.LedgerErrs); n != 1 {
		t.Errorf("numapref_ledger_write_errors_total = %v, want 1", n)
	}

	path := filepath.Join(t.TempDir(), "ledger.json")
	files.Write(t, path, `{"version":2,"containers":[`+strings.Repeat(" ", 100)+`]}`)
	if _, err := h.newEngine(EngineConfig{LedgerPath: path, ledgerLimit: 64}); !errors.Is(err, fsutil.ErrTooLarge) {
		t.Errorf("starting on a ledger past the bound: %v, want ErrTooLarge", err)
	}
}

// A ledger path that is a symbolic link is neither read nor replaced: the engine says so,
// and sets nothing while it cannot write its ledger.
func TestEngineRefusesASymlinkedLedger(t *testing.T) {
	h := newFakeHost(t)
	h.addTask(100, -1)
	dir := t.TempDir()
	target := filepath.Join(dir, "target")
	files.Write(t, target, `{"version":2,"containers":[{"podUID":"pod","container":"main","tasks":{"100":{"start":1100,"prev":-1,"values":[1]}}}]}`)
	path := filepath.Join(dir, "ledger.json")
	if err := os.Symlink(target, path); err != nil {
		t.Fatal(err)
	}
	e, err := h.newEngine(EngineConfig{LedgerPath: path})
	if !errors.Is(err, fsutil.ErrSymlink) {
		t.Errorf("NewEngine on a linked ledger: %v, want ErrSymlink", err)
	}
	if e.ledger.Len() != 0 {
		t.Errorf("the engine took the link's target as its ledger: %v", e.ledger.View().Clone())
	}
	e.SetDesired([]desire.Desire{fakeDesire(1)})
	e.Pass()
	if r := e.Results()[fakeDesire(1).Key()]; r.Reason != numav1.ReasonLedgerError {
		t.Errorf("result %s (%s), want LedgerError", r.Reason, r.Message)
	}
	if v := h.value(100); v != -1 {
		t.Errorf("task 100 holds %d, want -1", v)
	}
	if got, _ := os.ReadFile(target); !strings.Contains(string(got), `"100"`) {
		t.Errorf("the link's target was overwritten: %s", got)
	}

	// Nor are the placement choices read through a link.
	files.Write(t, filepath.Join(dir, "choices-target"), `{"version":1,"choices":[{"podUID":"pod","group":"g","node":1}]}`)
	if err := os.Symlink(filepath.Join(dir, "choices-target"), filepath.Join(dir, "choices.json")); err != nil {
		t.Fatal(err)
	}
	if c, err := loadChoices(filepath.Join(dir, "choices.json")); !errors.Is(err, fsutil.ErrSymlink) || len(c) != 0 {
		t.Errorf("loadChoices through a link = %v, %v; want none and ErrSymlink", c, err)
	}
}

// Temporary files a ledger write killed mid-way left are removed when the engine starts.
func TestEngineRemovesStaleLedgerTemps(t *testing.T) {
	h := newFakeHost(t)
	dir := t.TempDir()
	stale := filepath.Join(dir, ".ledger.json.tmp-4242")
	files.Write(t, stale, `{"version":2,"containers":[]}`)
	h.engine(EngineConfig{LedgerPath: filepath.Join(dir, "ledger.json")})
	if _, err := os.Stat(stale); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("stale temporary file still there: %v", err)
	}
}

// After a reboot the ledger's task ids name other tasks (here, task 100 is a new task
// that chose node 1 itself, and happens to have the old one's start time): nothing is
// undone from it, and it is dropped.
func TestEngineDropsALedgerOfAnotherBoot(t *testing.T) {
	h := newFakeHost(t)
	bootID := filepath.Join(h.proc, "sys", "kernel", "random", "boot_id")
	files.Write(t, bootID, "11111111-1111-1111-1111-111111111111\n")
	h.addTask(100, -1)
	path := filepath.Join(t.TempDir(), "ledger.json")
	first := h.engine(EngineConfig{LedgerPath: path})
	first.SetDesired([]desire.Desire{fakeDesire(1)})
	first.Pass()
	if v := h.value(100); v != 1 {
		t.Fatalf("not applied: task 100 holds %d", v)
	}

	files.Write(t, bootID, "22222222-2222-2222-2222-222222222222\n") // the host rebooted
	second := h.engine(EngineConfig{LedgerPath: path})
	if second.ledger.Len() != 0 {
		t.Errorf("ledger of the earlier boot loaded: %v", second.ledger.View().Clone())
	}
	second.SetDesired(nil)
	second.Pass()
	if v := h.value(100); v != 1 {
		t.Errorf("task 100 of the new boot holds %d, want its own 1: the old ledger must not undo anything", v)
	}
	l, err := readLedger(path)
	data, _ := os.ReadFile(path)
	if err != nil || len(l) != 0 || !strings.Contains(string(data), `"bootID":"22222222-2222-2222-2222-222222222222"`) {
		t.Errorf("ledger after the reboot = %v, %v (%s); want empty, of the new boot", l, err, data)
	}
}

// The ledger's files hold, after every pass, what the engine's ledger does: a restarted
// engine reads the same. A pass appends to the journal and leaves the snapshot alone; a
// full pass compacts once the journal passes its size.
func TestEngineLedgerFilesFollowThePasses(t *testing.T) {
	h := newFakeHost(t)
	h.addTask(100, -1)
	path := filepath.Join(t.TempDir(), "ledger.json")
	e := h.engine(EngineConfig{LedgerPath: path, journalCompactAt: 1 << 20})
	same := func(step string) {
		t.Helper()
		l, err := readLedger(path)
		if err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		if diff := cmp.Diff(e.ledger.View().Clone(), l); diff != "" {
			t.Fatalf("%s: the files say (-engine +files):\n%s", step, diff)
		}
	}
	e.SetDesired([]desire.Desire{fakeDesire(1)})
	e.Pass()
	same("applied")
	snap, journal := files.Stat(t, path), files.Stat(t, statedir.JournalOf(path))
	h.addTask(101, -1)
	h.addTask(102, 0)
	e.Pass()
	same("two tasks more")
	h.moveOut(100)
	e.Pass()
	same("a task gone")
	if !os.SameFile(snap, files.Stat(t, path)) || files.Stat(t, path).ModTime() != snap.ModTime() {
		t.Errorf("the snapshot was rewritten; passes must only append to the journal")
	}
	if grown := files.Stat(t, statedir.JournalOf(path)); !os.SameFile(journal, grown) || grown.Size() <= journal.Size() {
		t.Errorf("journal %d bytes, then %d: want appended to", journal.Size(), grown.Size())
	}
	e.SetDesired([]desire.Desire{fakeDesire(0)}) // values in flight, written ahead, then settled
	e.Pass()
	same("moved to node 0")

	// Restarted with a journal bound of 1 byte: the first full pass whose journal passes
	// the snapshot's size compacts.
	e = h.engine(EngineConfig{LedgerPath: path, journalCompactAt: 1})
	snap = files.Stat(t, path)
	for node := 0; os.SameFile(snap, files.Stat(t, path)); node = 1 - node {
		if files.Stat(t, statedir.JournalOf(path)).Size() > snap.Size() {
			t.Fatal("the journal passed the snapshot's size and no full pass compacted it")
		}
		e.SetDesired([]desire.Desire{fakeDesire(node)})
		e.Pass()
		same(fmt.Sprintf("moved to node %d", node))
	}
	e.SetDesired(nil)
	e.Pass()
	same("undone")
	if e.ledger.Len() != 0 {
		t.Errorf("ledger after undo: %v", e.ledger.View().Clone())
	}
}

// envelopeFile is a ledger file of version (3 or 4) holding content, with its checksum.
func envelopeFile(t *testing.T, version int, content string) string {
	t.Helper()
	sum := sha256.Sum256([]byte(content))
	return fmt.Sprintf(`{"version":%d,"sha256":"%s","ledger":%s}`, version, hex.EncodeToString(sum[:]), content)
}

// testLedgerContent is a ledger of the fake host's container with task 100 at node 1.
const testLedgerContent = `{"bootID":"b","containers":[{"podUID":"pod","container":"main",` +
	`"ref":{"podUID":"pod","containerID":"containerd://x"},"tasks":{"100":{"start":1100,"prev":-1,"values":[1]}}}]}`

// An agent upgraded in place reads the version 3 ledger its predecessor wrote and undoes
// what the predecessor set, even restarted again before any pass.
func TestEngineUndoesAVersion3Ledger(t *testing.T) {
	h := newFakeHost(t)
	h.addTask(100, 1) // the predecessor set it: the ledger records it
	path := filepath.Join(t.TempDir(), "ledger.json")
	files.Write(t, path, envelopeFile(t, 3, testLedgerContent))
	if e := h.engine(EngineConfig{LedgerPath: path}); !ledgerTask(e, fakeDesire(1).Key(), 100).Equal(&known.Task{Start: 1100, Prev: -1, Values: []int{1}}) {
		t.Fatalf("the version 3 ledger was not read: %v", e.ledger.View().Clone())
	}
	again := h.engine(EngineConfig{LedgerPath: path}) // restarted again, before any pass
	again.SetDesired(nil)
	again.Pass()
	if v := h.value(100); v != -1 {
		t.Errorf("task 100 holds %d after undo, want -1: the upgraded agent lost its predecessor's value", v)
	}
}

// A snapshot replaced while the engine runs (here by a link) is not appended to: the next
// write compacts, which refuses the link, and the pass sets nothing.
func TestEngineNoticesAReplacedLedger(t *testing.T) {
	h := newFakeHost(t)
	h.addTask(100, -1)
	dir := t.TempDir()
	path := filepath.Join(dir, "ledger.json")
	e := h.engine(EngineConfig{LedgerPath: path})
	e.SetDesired([]desire.Desire{fakeDesire(1)})
	e.Pass()
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(dir, "elsewhere"), path); err != nil {
		t.Fatal(err)
	}
	h.addTask(101, -1)
	e.Pass()
	if v := h.value(101); v != -1 {
		t.Errorf("task 101 holds %d: set though its ledger entry went to a journal no snapshot continues", v)
	}
}

// NewEngine reports a damaged ledger as ledger.ErrDamaged and in numapref_ledger_damaged,
// and the engine still works: tasks it recognises (here the one with the wanted value) are
// handled as for an empty ledger.
func TestEngineReportsADamagedLedger(t *testing.T) {
	for name, c := range map[string]struct {
		content string
		damaged bool
	}{
		"missing": {},
		"intact":  {content: "good"},
		"damaged": {content: "bad", damaged: true},
	} {
		t.Run(name, func(t *testing.T) {
			h := newFakeHost(t)
			h.addTask(100, -1)
			path := filepath.Join(t.TempDir(), "ledger.json")
			good := envelopeFile(t, 4, testLedgerContent)
			switch c.content {
			case "good":
				files.Write(t, path, good)
			case "bad":
				files.Write(t, path, strings.Replace(good, `"start":1100`, `"start":1101`, 1))
			}
			m := NewMetrics()
			e, err := h.newEngine(EngineConfig{LedgerPath: path, Metrics: m})
			if got := errors.Is(err, ledger.ErrDamaged); got != c.damaged {
				t.Errorf("NewEngine error %v; damaged %v, want %v", err, got, c.damaged)
			}
			want := 0.0
			if c.damaged {
				want = 1
			}
			if got := testutil.ToFloat64(m.LedgerDamaged); got != want {
				t.Errorf("numapref_ledger_damaged = %v, want %v", got, want)
			}
			e.SetDesired([]desire.Desire{fakeDesire(1)})
			e.Pass()
			if v := h.value(100); v != 1 {
				t.Errorf("task 100 holds %d, want 1", v)
			}
		})
	}
}

package nodeagent

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	clocktesting "k8s.io/utils/clock/testing"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
	"github.com/numapref/numapref/internal/fsutil"
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
	e.SetDesired([]Desire{fakeDesire(1)})
	waitFor(t, "the desire's pass", func() bool { return passStats(t, m, "full").count == 1 })

	r := e.Results()[fakeDesire(1).Key()]
	if r.Reason != numav1.ReasonLedgerError || !strings.Contains(r.Message, "ledger could not be written") {
		t.Errorf("result %s: %q; want LedgerError saying why", r.Reason, r.Message)
	}
	if v := h.snapshot(); v[100] != -1 || v[101] != -1 {
		t.Errorf("tasks hold %v after a failed ledger write, want both -1: nothing may be set", v)
	}
	if n := testutil.ToFloat64(m.ledgerErrs); n != 1 {
		t.Errorf("numapref_ledger_write_errors_total = %v, want 1", n)
	}
	if n := testutil.ToFloat64(m.containers.WithLabelValues(numav1.ReasonLedgerError, "")); n != 1 {
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
	e.SetDesired([]Desire{fakeDesire(1)})
	e.Pass()
	r := e.Results()[fakeDesire(1).Key()]
	if r.Reason != numav1.ReasonLedgerError || !strings.Contains(r.Message, "bound of 64 bytes") {
		t.Errorf("result %s: %q; want LedgerError naming the bound", r.Reason, r.Message)
	}
	if v := h.value(100); v != -1 {
		t.Errorf("task 100 holds %d, want -1", v)
	}
	if n := testutil.ToFloat64(m.ledgerErrs); n != 1 {
		t.Errorf("numapref_ledger_write_errors_total = %v, want 1", n)
	}

	path := filepath.Join(t.TempDir(), "ledger.json")
	writeFile(t, path, `{"version":2,"containers":[`+strings.Repeat(" ", 100)+`]}`)
	if _, err := loadLedger(path, 64); !errors.Is(err, fsutil.ErrTooLarge) {
		t.Errorf("loading a ledger past the bound: %v, want ErrTooLarge", err)
	}
}

// A ledger path that is a symbolic link is neither read nor replaced: the engine says so,
// and sets nothing while it cannot write its ledger.
func TestEngineRefusesASymlinkedLedger(t *testing.T) {
	h := newFakeHost(t)
	h.addTask(100, -1)
	dir := t.TempDir()
	target := filepath.Join(dir, "target")
	writeFile(t, target, `{"version":2,"containers":[{"podUID":"pod","container":"main","tasks":{"100":{"start":1100,"prev":-1,"values":[1]}}}]}`)
	path := filepath.Join(dir, "ledger.json")
	if err := os.Symlink(target, path); err != nil {
		t.Fatal(err)
	}
	e, err := h.newEngine(EngineConfig{LedgerPath: path})
	if !errors.Is(err, fsutil.ErrSymlink) {
		t.Errorf("NewEngine on a linked ledger: %v, want ErrSymlink", err)
	}
	if len(e.ledger) != 0 {
		t.Errorf("the engine took the link's target as its ledger: %v", e.ledger)
	}
	e.SetDesired([]Desire{fakeDesire(1)})
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
	writeFile(t, filepath.Join(dir, "choices-target"), `{"version":1,"choices":[{"podUID":"pod","group":"g","node":1}]}`)
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
	writeFile(t, stale, `{"version":2,"containers":[]}`)
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
	writeFile(t, bootID, "11111111-1111-1111-1111-111111111111\n")
	h.addTask(100, -1)
	path := filepath.Join(t.TempDir(), "ledger.json")
	first := h.engine(EngineConfig{LedgerPath: path})
	first.SetDesired([]Desire{fakeDesire(1)})
	first.Pass()
	if v := h.value(100); v != 1 {
		t.Fatalf("not applied: task 100 holds %d", v)
	}

	writeFile(t, bootID, "22222222-2222-2222-2222-222222222222\n") // the host rebooted
	second := h.engine(EngineConfig{LedgerPath: path})
	if len(second.ledger) != 0 {
		t.Errorf("ledger of the earlier boot loaded: %v", second.ledger)
	}
	second.SetDesired(nil)
	second.Pass()
	if v := h.value(100); v != 1 {
		t.Errorf("task 100 of the new boot holds %d, want its own 1: the old ledger must not undo anything", v)
	}
	f, err := loadLedger(path, defaultLedgerLimit)
	if err != nil || len(f.Containers) != 0 || f.BootID != "22222222-2222-2222-2222-222222222222" {
		t.Errorf("ledger after the reboot = %+v, %v; want empty, of the new boot", f, err)
	}
}

// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package nodeagent

import (
	"github.com/numapref/numapref/internal/testutil/files"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/numapref/numapref/internal/nodeagent/desire"
)

// Unit tests of the persisted desired state, on a fake host: an agent restarted while the
// apiserver is away enforces the last desired state it was given.

// fakeRestart makes the engine a restarted agent would: the same state files, no
// desired state from the API yet.
func fakeRestart(h *fakeHost, dir string, cfg EngineConfig) *Engine {
	cfg.LedgerPath, cfg.DesiredPath = filepath.Join(dir, "ledger.json"), filepath.Join(dir, "desired.json")
	return h.engine(cfg)
}

func TestEngineEnforcesThePersistedDesiredStateAtStart(t *testing.T) {
	h := newFakeHost(t)
	h.addTask(100, -1)
	dir := t.TempDir()
	first := fakeRestart(h, dir, EngineConfig{})
	first.SetDesired([]desire.Desire{fakeDesire(1)})
	first.Pass()
	if v := h.value(100); v != 1 {
		t.Fatalf("not applied: task 100 holds %d", v)
	}

	// The agent restarts while the API is away; meanwhile the container forked.
	h.addTask(101, -1)
	m := NewMetrics()
	fc := clocktesting.NewFakeClock(time.Now())
	second := fakeRestart(h, dir, EngineConfig{Metrics: m, Clock: fc, RescanInterval: time.Hour})
	startEngine(t, second) // no SetDesired: the persisted state is the first one
	waitFor(t, "a pass on the persisted desired state", func() bool { return passStats(t, m, "full").count == 1 })
	if v := h.snapshot(); v[100] != 1 || v[101] != 1 {
		t.Errorf("tasks hold %v after the restart, want both at 1: the persisted state is enforced at once", v)
	}

	// The API is back: its desired state replaces the persisted one (here: deselected).
	second.SetDesired(nil)
	waitFor(t, "the live desired state's pass", func() bool { return passStats(t, m, "full").count == 2 })
	if v := h.snapshot(); v[100] != -1 || v[101] != -1 {
		t.Errorf("tasks hold %v after the live state deselected them, want both -1", v)
	}
	ds, found, err := loadDesired(filepath.Join(dir, "desired.json"))
	if err != nil || !found || len(ds) != 0 {
		t.Errorf("persisted desired state = %v (found %v, %v); want the live, empty one", ds, found, err)
	}
}

// What is persisted comes back as it was given; it is written when it changes only.
func TestEnginePersistsTheDesiredStateWhenItChanges(t *testing.T) {
	h := newFakeHost(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "desired.json")
	e := fakeRestart(h, dir, EngineConfig{})
	e.Pass()
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("desired state written before any was given: %v", err)
	}
	d := fakeDesire(1)
	d.Pod.Namespace, d.Pod.Name, d.Preference = "ns", "db-0", "db"
	d.Placement.Mode, d.Placement.Group, d.Placement.Weight = "Spread", "NumaPreference ns/db", 1500
	skipped := desire.Desire{PodUID: "other", Container: "init", Node: -1, Refusal: "ContainerNotRunning", Message: "waiting"}
	e.SetDesired([]desire.Desire{d, skipped})
	e.Pass()
	got, found, err := loadDesired(path)
	if err != nil || !found {
		t.Fatalf("loadDesired: found %v, %v", found, err)
	}
	if diff := cmp.Diff(map[desire.ContainerKey]desire.Desire{d.Key(): d, skipped.Key(): skipped}, got); diff != "" {
		t.Errorf("persisted desired state (-want +got):\n%s", diff)
	}
	before, _ := os.Stat(path)
	e.SetDesired([]desire.Desire{skipped, d}) // the same state
	e.Pass()
	if after, _ := os.Stat(path); !os.SameFile(before, after) {
		t.Error("the same desired state was written again")
	}
}

// A persisted desired state that cannot be read is no desired state: the restarted
// engine waits for the API's and, meanwhile, neither applies nor undoes anything.
func TestEngineIgnoresADamagedDesiredState(t *testing.T) {
	tests := map[string]string{
		"truncated":        `{"version":1,"desires":[{"PodUID":"pod","Container":"main","Node":`,
		"another version":  `{"version":9,"desires":[]}`,
		"an unknown field": `{"version":1,"desires":[{"PodUID":"pod","Container":"main","Nodes":[1]}]}`,
	}
	for name, content := range tests {
		t.Run(name, func(t *testing.T) {
			h := newFakeHost(t)
			h.addTask(100, -1)
			dir := t.TempDir()
			first := fakeRestart(h, dir, EngineConfig{})
			first.SetDesired([]desire.Desire{fakeDesire(1)})
			first.Pass()
			h.addTask(101, -1)
			files.Write(t, filepath.Join(dir, "desired.json"), content)

			second, err := h.newEngine(EngineConfig{LedgerPath: filepath.Join(dir, "ledger.json"), DesiredPath: filepath.Join(dir, "desired.json")})
			if err == nil || !strings.Contains(err.Error(), "waiting for the API") {
				t.Errorf("NewEngine error %v, want one saying the persisted state is unusable", err)
			}
			second.Pass()
			if v := h.snapshot(); v[100] != 1 || v[101] != -1 {
				t.Errorf("tasks hold %v; want 100 still at 1 (no undo) and 101 untouched (no desire)", v)
			}
		})
	}
}

// A failed write of the desired state is counted; placement goes on.
func TestEngineDesiredStateWriteError(t *testing.T) {
	h := newFakeHost(t)
	h.addTask(100, -1)
	m := NewMetrics()
	e := h.engine(EngineConfig{Metrics: m, DesiredPath: filepath.Join(t.TempDir(), "missing", "desired.json")})
	e.SetDesired([]desire.Desire{fakeDesire(1)})
	e.Pass()
	if v := h.value(100); v != 1 {
		t.Errorf("task 100 holds %d, want 1", v)
	}
	if n := testutil.ToFloat64(m.DesiredErrs); n != 1 {
		t.Errorf("numapref_desired_state_write_errors_total = %v, want 1", n)
	}
}

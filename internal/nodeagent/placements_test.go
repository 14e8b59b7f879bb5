// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package nodeagent

import (
	"github.com/numapref/numapref/internal/testutil/files"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"
	clocktesting "k8s.io/utils/clock/testing"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
	"github.com/numapref/numapref/internal/nodeagent/desire"
	"github.com/numapref/numapref/internal/nodeagent/known"
	"github.com/numapref/numapref/internal/nodeagent/plan"
	"github.com/numapref/numapref/internal/numa"
)

// newTestMemory is a placement memory on a fake clock, with its choices at path, on a
// ledger that knows l; boottime reads CLOCK_BOOTTIME.
func newTestMemory(t *testing.T, path string, l known.Containers, boottime func() (uint64, bool)) (*placementMemory, *clocktesting.FakeClock, error) {
	t.Helper()
	fc := clocktesting.NewFakeClock(time.Now())
	if boottime == nil {
		boottime = func() (uint64, bool) { return 0, false }
	}
	m, err := newPlacementMemory(EngineConfig{ChoicesPath: path, OnlineNodes: []int{0, 1}, Clock: fc, Boottime: boottime,
		Log: logr.Discard()}, known.NewView(l))
	return m, fc, err
}

// The choices a plan changes are kept and saved before the plan acts; a restarted
// memory reads them back. A plan that resolved nothing leaves them, and its resolutions.
func TestPlacementMemoryKeepsChoices(t *testing.T) {
	path := filepath.Join(t.TempDir(), "choices.json")
	m, _, err := newTestMemory(t, path, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	c := plan.Choice{ChoiceKey: plan.ChoiceKey{PodUID: "pod", Group: "g"}, Mode: numav1.PlacementModeSpread, Node: 1, Why: "w", Weight: 1000}
	m.adopt(plan.Plan{Resolved: true, ChoicesChanged: true, Choices: plan.Choices{c.ChoiceKey: c}})
	m.adopt(plan.Plan{}) // a fork pass's: nothing resolved
	again, _, err := newTestMemory(t, path, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(plan.Choices{c.ChoiceKey: c}, again.choices); diff != "" {
		t.Errorf("choices after a restart (-want +got):\n%s", diff)
	}
	var in plan.Input
	again.intoInput(&in)
	delete(in.Choices, c.ChoiceKey)
	if len(again.choices) != 1 {
		t.Error("planning's copy of the choices is the memory's own")
	}
}

// A damaged choices file, or one read through a link, is no choices and an error.
func TestPlacementMemoryRefusesDamagedChoices(t *testing.T) {
	dir := t.TempDir()
	files.Write(t, filepath.Join(dir, "damaged.json"), `{"version":9,"choices":[]}`)
	files.Write(t, filepath.Join(dir, "target"), `{"version":1,"choices":[{"podUID":"pod","group":"g","node":1}]}`)
	if err := os.Symlink(filepath.Join(dir, "target"), filepath.Join(dir, "link.json")); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"damaged.json", "link.json"} {
		m, _, err := newTestMemory(t, filepath.Join(dir, name), nil, nil)
		if err == nil || len(m.choices) != 0 {
			t.Errorf("%s: %d choices, %v; want none and an error", name, len(m.choices), err)
		}
	}
}

// The topology is read at the first full pass, when the desire changed, once
// topologyEvery passed, and while a node is not present; else not.
func TestPlacementMemoryReadsTheTopologyWhenDue(t *testing.T) {
	m, fc, _ := newTestMemory(t, "", nil, nil)
	reads := 0
	m.readTopo = func() (numa.Online, error) {
		reads++
		return numa.Online{Nodes: []int{0, 1}}, nil
	}
	absent := false
	steps := []struct {
		name string
		gen  uint64
		do   func()
		read bool
	}{
		{"the first pass", 1, nil, true},
		{"an idle rescan", 1, nil, false},
		{"a new desire", 2, nil, true},
		{"a node not present", 2, func() { absent = true }, true},
		{"all present again", 2, func() { absent = false }, false},
		{"topologyEvery later", 2, func() { fc.Step(topologyEvery) }, true},
	}
	for _, s := range steps {
		if s.do != nil {
			s.do()
		}
		before := reads
		m.readTopology(s.gen, func() bool { return absent })
		if got := reads > before; got != s.read {
			t.Errorf("%s: read %v, want %v", s.name, got, s.read)
		}
	}
}

// How a container was first placed is judged once, until it is forgotten: at its start,
// or after it with the time since its earliest task's start; the ledger's containers at
// start were placed before it.
func TestPlacementMemoryJudgesPlacedOnce(t *testing.T) {
	before := desire.ContainerKey{PodUID: "old", Container: "main"}
	now := uint64(20 * time.Second)
	m, _, _ := newTestMemory(t, "", known.Containers{before: {PodUID: "old", Container: "main"}},
		func() (uint64, bool) { return now, true })
	m.bootAtStart = uint64(5 * time.Second)
	key := fakeDesire(1).Key()
	if m.placedAt[before] != PlacedBeforeRestart {
		t.Errorf("the ledger's container: %q, want %q", m.placedAt[before], PlacedBeforeRestart)
	}
	at, d, observe := m.judgePlaced(key, false, []uint64{1200, 1100}) // ticks: 12 s and 11 s after boot
	if at != PlacedAtAfterStart || !observe || d != 9*time.Second {
		t.Errorf("judged %q, %v, observe %v; want %q, 9s (20 s - 11 s)", at, d, observe, PlacedAtAfterStart)
	}
	if at, _, _ := m.judgePlaced(key, true, []uint64{1100}); at != "" {
		t.Errorf("judged again: %q", at)
	}
	m.forgetPlaced(key)
	if at, _, _ := m.judgePlaced(key, true, []uint64{1100}); at != PlacedAtStart {
		t.Errorf("forgotten and placed at a start: %q, want %q", at, PlacedAtStart)
	}
	if _, _, observe := m.judgePlaced(desire.ContainerKey{PodUID: "early"}, false, []uint64{100}); observe {
		t.Error("a container older than the engine is observed")
	}
}

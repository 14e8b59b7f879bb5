// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package nodeagent

import (
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/numapref/numapref/internal/nodeagent/desire"
)

// newTestDesires is a desire owner on a fake clock, with a grace of a minute.
func newTestDesires(t *testing.T, path string) (*desires, *clocktesting.FakeClock) {
	t.Helper()
	fc := clocktesting.NewFakeClock(time.Now())
	return newDesires(EngineConfig{Clock: fc, StartGrace: time.Minute, DesiredPath: path}), fc
}

// keysOf are the keys of what a pass would act on now (a one-container pass: no lapse).
func keysOf(ds *desires) []desire.ContainerKey {
	d, _, _ := ds.forPass(false)
	return slices.SortedFunc(maps.Keys(d), func(a, b desire.ContainerKey) int { return strings.Compare(a.String(), b.String()) })
}

// Nothing is acted on before the first desire; the first, even empty, is a change, and so
// is every different one after it, each a new generation.
func TestDesiresSet(t *testing.T) {
	ds, _ := newTestDesires(t, "")
	if _, _, ok := ds.forPass(true); ok {
		t.Fatal("a pass may run before any desire")
	}
	if !ds.set(nil) {
		t.Error("the first desire, empty, is no change")
	}
	_, gen0, ok := ds.forPass(true)
	if !ok {
		t.Fatal("no pass after the first desire")
	}
	if ds.set(nil) {
		t.Error("the same desire again is a change")
	}
	if !ds.set([]desire.Desire{fakeDesire(1)}) {
		t.Error("a new desire is no change")
	}
	if _, gen, _ := ds.forPass(true); gen == gen0 {
		t.Errorf("generation %d after a change, as before", gen)
	}
}

// A start counts until the API holds its container (under the runtime's ID or the API's)
// or its grace passes while the API answers; while the API is away no start lapses, and
// when it answers again each grace begins anew. Until PlaceAtStart returns the start is
// being placed.
func TestDesiresStarts(t *testing.T) {
	ds, fc := newTestDesires(t, "")
	started := fakeDesire(1)
	started.Ref.ContainerID = "x" // the runtime's form
	if _, ok := ds.start(started); ok {
		t.Fatal("a start counted before the first desire")
	}
	ds.set(nil)
	before := ds.gen
	if gen, ok := ds.start(started); !ok || !ds.placing(started.Key()) || gen != before+1 {
		t.Fatalf("a start after the first desire did not count, is not being placed, or is not of a new generation (%d after %d)", gen, before)
	}
	ds.started(started.Key())
	if ds.placing(started.Key()) || len(keysOf(ds)) != 1 {
		t.Errorf("after PlaceAtStart returned: placing %v, desire %v; want not placing, the start desired", ds.placing(started.Key()), keysOf(ds))
	}
	ds.setReachable(false)
	fc.Step(2 * time.Minute)
	if ds.forPass(true); len(keysOf(ds)) != 1 {
		t.Error("a start lapsed while the API was away")
	}
	ds.setReachable(true)
	fc.Step(59 * time.Second)
	if ds.forPass(true); len(keysOf(ds)) != 1 {
		t.Error("a start lapsed before its new grace passed")
	}
	fc.Step(time.Second)
	if ds.forPass(true); len(keysOf(ds)) != 0 {
		t.Error("a start outlived its grace")
	}

	ds.start(started)
	ds.set([]desire.Desire{fakeDesire(1)}) // the API's form of the same container
	ds.set(nil)
	if len(keysOf(ds)) != 0 {
		t.Errorf("a start the API held, then deselected, is still desired: %v", keysOf(ds))
	}
}

// Drain empties the desire for good: what passes act on is empty, and neither a new
// desire nor a start changes it.
func TestDesiresDrain(t *testing.T) {
	ds, _ := newTestDesires(t, "")
	ds.set([]desire.Desire{fakeDesire(1)})
	ds.drain()
	if _, started := ds.start(fakeDesire(0)); ds.set([]desire.Desire{fakeDesire(1)}) || started {
		t.Error("a desire or a start counted after Drain")
	}
	if d, _, ok := ds.forPass(true); !ok || len(d) != 0 {
		t.Errorf("after Drain passes act on %v (ok %v), want nothing", d, ok)
	}
}

// The desire is persisted once per generation, and what is persisted is what a restarted
// owner starts from.
func TestDesiresPersist(t *testing.T) {
	path := filepath.Join(t.TempDir(), "desired.json")
	ds, _ := newTestDesires(t, path)
	ds.set([]desire.Desire{fakeDesire(1)})
	d, gen, _ := ds.forPass(true)
	if err := ds.persist(d, gen); err != nil {
		t.Fatal(err)
	}
	if err := ds.persist(nil, gen); err != nil { // the same generation: not written again
		t.Fatal(err)
	}
	again, _ := newTestDesires(t, path)
	found, err := again.loadPersisted(logr.Discard())
	if !found || err != nil || !slices.Equal(keysOf(again), []desire.ContainerKey{fakeDesire(1).Key()}) {
		t.Errorf("restarted: found %v, %v, desire %v; want the persisted one", found, err, keysOf(again))
	}
}

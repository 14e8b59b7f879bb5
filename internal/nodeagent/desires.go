// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package nodeagent

import (
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/numapref/numapref/internal/fsutil"
	"github.com/numapref/numapref/internal/nodeagent/desire"
)

// desires is what the engine is asked to place: the API's desired state (SetDesired), the
// starts the runtime announces before the API reports them (PlaceAtStart) with their
// grace, and what the two make together, which passes act on. It counts the generations
// of that desire, knows whether any has arrived yet (synced), whether the API answers
// (no start lapses while it does not) and whether the engine drains, and keeps the desire
// on disk (desiredstate.go) for an agent restarted while the API is away.
type desires struct {
	clock clock.PassiveClock
	grace time.Duration // how long a start counts while the API does not hold it
	path  string        // the persisted desired state; "" for none

	mu sync.Mutex // guards the fields below
	// desired is what passes act on: api, the last SetDesired's, with the starts it does
	// not hold yet.
	desired map[desire.ContainerKey]desire.Desire
	api     map[desire.ContainerKey]desire.Desire
	starts  map[desire.ContainerKey]startDesire
	// apiDown is set while the API server does not answer (SetAPIReachable): no start
	// lapses then.
	apiDown bool
	// gen counts the changes of desired.
	gen    uint64
	synced bool

	// draining is set by Drain: from then on the engine places nothing.
	draining atomic.Bool
	// savedGen is the generation on disk; only passes (under the engine's passMu) use it.
	savedGen uint64
}

func newDesires(cfg EngineConfig) *desires {
	return &desires{clock: cfg.Clock, grace: cfg.StartGrace, path: cfg.DesiredPath,
		desired: map[desire.ContainerKey]desire.Desire{}, api: map[desire.ContainerKey]desire.Desire{},
		starts: map[desire.ContainerKey]startDesire{}}
}

// set replaces the API's desired state with ds; it reports whether what passes act on
// changed (or this is the first desire). A draining engine ignores it.
func (ds *desires) set(list []desire.Desire) (changed bool) {
	m := make(map[desire.ContainerKey]desire.Desire, len(list))
	for _, d := range list {
		m[d.Key()] = d
	}
	ds.mu.Lock()
	defer ds.mu.Unlock()
	if ds.draining.Load() {
		return false // Drain emptied the desire for good
	}
	ds.api = m
	changed = ds.mergeStarts() || !ds.synced
	ds.synced = true
	return changed
}

// forPass is the desire a pass acts on and its generation; ok is false before the first
// desire. A full pass first drops the starts past their grace.
func (ds *desires) forPass(full bool) (desired map[desire.ContainerKey]desire.Desire, gen uint64, ok bool) {
	ds.mu.Lock()
	defer ds.mu.Unlock()
	if !ds.synced {
		return nil, 0, false
	}
	if full {
		ds.mergeStarts() // starts past their grace end here when no SetDesired comes
	}
	return ds.desired, ds.gen, true
}

// startDesire is a desire PlaceAtStart learnt, at the time it did.
type startDesire struct {
	desire.Desire
	at time.Time
	// placing is true until PlaceAtStart returns: the runtime waits for it before it
	// starts the container, so whatever pass sets the container meanwhile (a full pass
	// that took the pass lock first) places it at its start.
	placing bool
}

// start adds d, a container the runtime is about to start, to the desire, and returns the
// generation that holds it; ok is false before the first desire and once draining.
func (ds *desires) start(d desire.Desire) (gen uint64, ok bool) {
	ds.mu.Lock()
	defer ds.mu.Unlock()
	if !ds.synced || ds.draining.Load() {
		return 0, false
	}
	ds.starts[d.Key()] = startDesire{Desire: d, at: ds.clock.Now(), placing: true}
	ds.mergeStarts()
	return ds.gen, true
}

// started notes that the runtime may start container key now: PlaceAtStart returned.
func (ds *desires) started(key desire.ContainerKey) {
	ds.mu.Lock()
	defer ds.mu.Unlock()
	if s, ok := ds.starts[key]; ok {
		s.placing = false
		ds.starts[key] = s
	}
}

// placing says whether PlaceAtStart is placing container key: the runtime has not
// started it yet.
func (ds *desires) placing(key desire.ContainerKey) bool {
	ds.mu.Lock()
	defer ds.mu.Unlock()
	return ds.starts[key].placing
}

// setReachable notes whether the API answers; when it answers again, each start's grace
// begins anew.
func (ds *desires) setReachable(reachable bool) {
	ds.mu.Lock()
	defer ds.mu.Unlock()
	if ds.apiDown == !reachable {
		return
	}
	ds.apiDown = !reachable
	if reachable {
		now := ds.clock.Now()
		for key, s := range ds.starts {
			s.at = now
			ds.starts[key] = s
		}
	}
}

// mergeStarts makes desired the API's desire with the starts it does not hold yet, and
// drops the starts it holds (the same container ID) or that are older than the grace
// while the API answers. It reports whether desired changed (then its generation moved
// on). mu is held.
func (ds *desires) mergeStarts() bool {
	now := ds.clock.Now()
	for key, s := range ds.starts {
		lapsed := !ds.apiDown && now.Sub(s.at) >= ds.grace
		if a, ok := ds.api[key]; ok && desire.SameContainer(a.Ref.ContainerID, s.Ref.ContainerID) || lapsed {
			delete(ds.starts, key)
		}
	}
	merged := ds.api
	if len(ds.starts) > 0 {
		merged = maps.Clone(ds.api)
		for key, s := range ds.starts {
			merged[key] = s.Desire
		}
	}
	if ds.synced && maps.Equal(merged, ds.desired) {
		return false
	}
	ds.desired = merged
	ds.gen++
	return true
}

// drain empties the desire for good: from now on nothing is placed.
func (ds *desires) drain() {
	ds.mu.Lock()
	defer ds.mu.Unlock()
	ds.draining.Store(true) // under mu: no set lands after the empty desire
	if len(ds.desired) > 0 || !ds.synced {
		ds.desired, ds.api, ds.synced = map[desire.ContainerKey]desire.Desire{}, map[desire.ContainerKey]desire.Desire{}, true
		ds.gen++
	}
	clear(ds.starts)
}

// of returns the current desires for the containers of pod uid, by container.
func (ds *desires) of(uid types.UID) map[string]*desire.Desire {
	ds.mu.Lock()
	defer ds.mu.Unlock()
	out := map[string]*desire.Desire{}
	for key, d := range ds.desired {
		if key.PodUID == uid {
			out[key.Container] = &d
		}
	}
	return out
}

// persist writes the desired state of generation gen unless it is on disk already (or
// the engine keeps none). Only passes call it.
func (ds *desires) persist(desired map[desire.ContainerKey]desire.Desire, gen uint64) error {
	if ds.path == "" || gen == ds.savedGen {
		return nil
	}
	if err := saveDesired(ds.path, desired); err != nil {
		return err
	}
	ds.savedGen = gen
	return nil
}

// loadPersisted takes the desired state the last run persisted, if any, as the first
// SetDesired: the engine enforces it at once, before the API answers. found says it did.
func (ds *desires) loadPersisted(log logr.Logger) (found bool, err error) {
	if ds.path == "" {
		return false, nil
	}
	if _, err := fsutil.RemoveStaleTemps(ds.path); err != nil {
		log.Error(err, "Removing stale temporary files", "file", ds.path)
	}
	loaded, found, err := loadDesired(ds.path)
	if !found {
		return false, err
	}
	ds.mu.Lock()
	defer ds.mu.Unlock()
	ds.desired, ds.api, ds.synced = loaded, loaded, true
	log.Info("Enforcing the desired state the last run persisted until the API's arrives", "containers", len(loaded))
	return true, nil
}

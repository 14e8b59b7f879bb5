package nodeagent

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"

	"github.com/numapref/numapref/internal/fsutil"
)

// The desired state the controllers last handed the engine (SetDesired) is kept on disk
// too, beside the ledger, written atomically when it changes. An agent that restarts while
// the apiserver is unreachable has no other source: it enforces the persisted state at
// once (fork events and rescans place new tasks), and the live state replaces it when the
// caches sync. Desires are written as Desire's fields are named; a field renamed makes an
// older file unreadable (the agent then waits for the API, as on a first start), a field
// added reads as its zero value from an older file.

// desiredVersion is the format of desiredFile.
const desiredVersion = 1

// loadDesired reads the desired state persisted at path. found is false when there is
// none (no file, or one that cannot be read: the error says why).
func loadDesired(path string) (ds map[ContainerKey]Desire, found bool, err error) {
	data, err := fsutil.ReadStateFile(path, stateFileLimit)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("persisted desired state unreadable, waiting for the API's: %w", err)
	}
	var f desiredFile
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields() // written by an agent whose Desire differs
	if err := dec.Decode(&f); err != nil || f.Version != desiredVersion {
		return nil, false, fmt.Errorf("persisted desired state %s is damaged or of another version (version %d, %v); waiting for the API's",
			path, f.Version, err)
	}
	ds = make(map[ContainerKey]Desire, len(f.Desires))
	for _, d := range f.Desires {
		if d.PodUID != "" && d.Container != "" {
			ds[d.Key()] = d
		}
	}
	return ds, true, nil
}

// saveDesired writes desired to the engine's desired-state file.
func (e *Engine) saveDesired(desired map[ContainerKey]Desire) error {
	f := desiredFile{Version: desiredVersion, Desires: make([]Desire, 0, len(desired))}
	for _, d := range desired {
		f.Desires = append(f.Desires, d)
	}
	slices.SortFunc(f.Desires, func(a, b Desire) int {
		return strings.Compare(a.Key().String(), b.Key().String())
	})
	data, err := json.Marshal(f)
	if err != nil {
		return fmt.Errorf("encoding the desired state: %w", err)
	}
	if len(data) > stateFileLimit {
		return fmt.Errorf("writing the desired state %s: %d bytes, past its bound of %d", e.cfg.DesiredPath, len(data), stateFileLimit)
	}
	if err := fsutil.WriteFileAtomic(e.cfg.DesiredPath, data, 0o600); err != nil {
		return fmt.Errorf("writing the desired state: %w", err)
	}
	return nil
}

// persistDesired writes the desired state of generation gen unless it is on disk already.
// A failed write is counted and logged, and retried by the next pass: enforcement does not
// wait for it (the ledger, not this file, is what undo relies on).
func (e *Engine) persistDesired(desired map[ContainerKey]Desire, gen uint64) {
	if e.cfg.DesiredPath == "" || gen == e.savedGen {
		return
	}
	if err := e.saveDesired(desired); err != nil {
		e.cfg.Metrics.reportDesiredError()
		e.cfg.Log.Error(err, "Persisting the desired state; a restart while the API is unreachable would enforce an older one")
		return
	}
	e.savedGen = gen
}

// desiredFile is the desired state on disk.
type desiredFile struct {
	Version int      `json:"version"`
	Desires []Desire `json:"desires"`
}

// loadDesired takes the desired state the last run persisted, if any, as the first
// SetDesired: the engine enforces it at once, before the API answers.
func (e *Engine) loadDesired() error {
	if e.cfg.DesiredPath == "" {
		return nil
	}
	if _, err := fsutil.RemoveStaleTemps(e.cfg.DesiredPath); err != nil {
		e.cfg.Log.Error(err, "Removing stale temporary files", "file", e.cfg.DesiredPath)
	}
	ds, found, err := loadDesired(e.cfg.DesiredPath)
	if !found {
		return err
	}
	e.desired, e.api, e.synced = ds, ds, true
	e.cfg.Log.Info("Enforcing the desired state the last run persisted until the API's arrives", "containers", len(ds))
	signal(e.kick)
	return nil
}

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
	"github.com/numapref/numapref/internal/nodeagent/desire"
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

// stateFileLimit bounds the desired state's file and the choices' (as the ledger's
// own bound does its files), and no larger one is read.
const stateFileLimit = 16 << 20

// desiredFile is the desired state on disk.
type desiredFile struct {
	Version int             `json:"version"`
	Desires []desire.Desire `json:"desires"`
}

// loadDesired reads the desired state persisted at path. found is false when there is none (no file, or one that
// cannot be read: the error says why).
func loadDesired(path string) (ds map[desire.ContainerKey]desire.Desire, found bool, err error) {
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
	ds = make(map[desire.ContainerKey]desire.Desire, len(f.Desires))
	for _, d := range f.Desires {
		if d.PodUID != "" && d.Container != "" {
			ds[d.Key()] = d
		}
	}
	return ds, true, nil
}

// saveDesired writes desired to the desired-state file at path.
func saveDesired(path string, desired map[desire.ContainerKey]desire.Desire) error {
	f := desiredFile{Version: desiredVersion, Desires: make([]desire.Desire, 0, len(desired))}
	for _, d := range desired {
		f.Desires = append(f.Desires, d)
	}
	slices.SortFunc(f.Desires, func(a, b desire.Desire) int {
		return strings.Compare(a.Key().String(), b.Key().String())
	})
	data, err := json.Marshal(f)
	if err != nil {
		return fmt.Errorf("encoding the desired state: %w", err)
	}
	if len(data) > stateFileLimit {
		return fmt.Errorf("writing the desired state %s: %d bytes, past its bound of %d", path, len(data), stateFileLimit)
	}
	if err := fsutil.WriteFileAtomic(path, data, 0o600); err != nil {
		return fmt.Errorf("writing the desired state: %w", err)
	}
	return nil
}

// loadDesired takes the desired state the last run persisted, if any, as the first
// SetDesired, and wakes the loop to enforce it.
func (e *Engine) loadDesired() error {
	found, err := e.desires.loadPersisted(e.cfg.Log)
	if found {
		signal(e.kick)
	}
	return err
}

// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package nodeagent

import (
	"fmt"
	"slices"
	"strings"

	"github.com/numapref/numapref/internal/nodeagent/desire"
	"github.com/numapref/numapref/internal/statefile"
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

// desiredFile is the desired state's file: strict, since a Desire field renamed by
// another version must make the file unreadable, not read as its zero value.
func desiredFile(path string) statefile.File[desiredPayload] {
	return statefile.File[desiredPayload]{Path: path, Version: desiredVersion, Limit: stateFileLimit, Strict: true}
}

type desiredPayload struct {
	Desires []desire.Desire `json:"desires"`
}

// loadDesired reads the desired state persisted at path. found is false when there is
// none (no file, or one that cannot be read: the error says why).
func loadDesired(path string) (ds map[desire.ContainerKey]desire.Desire, found bool, err error) {
	f, found, err := desiredFile(path).Load()
	if err != nil {
		return nil, false, fmt.Errorf("persisted desired state %s is unusable (%w); waiting for the API's", path, err)
	}
	if !found {
		return nil, false, nil
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
	f := desiredPayload{Desires: make([]desire.Desire, 0, len(desired))}
	for _, d := range desired {
		f.Desires = append(f.Desires, d)
	}
	slices.SortFunc(f.Desires, func(a, b desire.Desire) int {
		return strings.Compare(a.Key().String(), b.Key().String())
	})
	if err := desiredFile(path).Save(f); err != nil {
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

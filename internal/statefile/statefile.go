// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

// Package statefile is the agent's versioned JSON state file: one JSON object whose first
// member is its format's version, {"version":N, ...}, and whose other members are a
// store's payload. It is read only through fsutil.ReadStateFile (never through a link,
// never past its bound) and replaced only through fsutil.WriteFileAtomic, so a crash
// leaves the old content or the new.
//
// The payload is a struct of the store's, without the version: File adds it on Save and
// checks it on Load. Since encoding/json writes a struct's fields in order and without
// space, what Save writes for a payload is byte for byte what json.Marshal writes for a
// struct of a Version int `json:"version"` field followed by the payload's fields: the
// format of every file written before this package.
package statefile

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"strconv"

	"github.com/numapref/numapref/internal/fsutil"
)

// Errors of Load, for errors.Is. A file that is a link or past its bound yields
// fsutil.ErrSymlink or fsutil.ErrTooLarge.
var (
	// ErrVersion means the file is of another format version than the store reads (or
	// names none).
	ErrVersion = errors.New("of another version")
	// ErrDamaged means the file is not a JSON object, or its members are not the
	// payload's (with Strict: it has a member the payload does not know).
	ErrDamaged = errors.New("damaged")
)

// versionKey is the member that holds a file's version.
const versionKey = "version"

// File is the state file at Path holding a T. T is a struct (or a type that marshals to a
// JSON object) with no member named "version".
type File[T any] struct {
	// Path is the file.
	Path string
	// Version is the file's format: Save writes it, Load refuses another.
	Version int
	// Limit bounds the file in bytes, read and written; it must be set.
	Limit int64
	// Strict refuses, on Load, a member the payload does not know: for a payload whose
	// fields are an interface (an older agent's file with a field renamed is then not
	// misread as that field's zero value).
	Strict bool
}

// Load reads the file. A missing file gives found false and no error; any other file that
// cannot be used gives found false and an error that says why: fsutil.ErrSymlink,
// fsutil.ErrTooLarge, ErrVersion or ErrDamaged.
func (f File[T]) Load() (v T, found bool, err error) {
	v, _, found, err = f.LoadRaw()
	return v, found, err
}

// LoadRaw is Load that also returns the file's content as read, for a store that tells an
// unchanged payload by its bytes (Encode gives the bytes a Save would write).
func (f File[T]) LoadRaw() (v T, data []byte, found bool, err error) {
	if f.Limit <= 0 {
		return v, nil, false, fmt.Errorf("reading %s: no bound set", f.Path)
	}
	data, err = fsutil.ReadStateFile(f.Path, f.Limit)
	if errors.Is(err, fs.ErrNotExist) {
		return v, nil, false, nil
	}
	if err != nil {
		return v, nil, false, err // it names the file
	}
	if v, err = f.decode(data); err != nil {
		return v, nil, false, fmt.Errorf("%s is %w", f.Path, err)
	}
	return v, data, true, nil
}

// decode checks data's version and decodes its other members into a T.
func (f File[T]) decode(data []byte) (T, error) {
	var v T
	var members map[string]json.RawMessage
	if err := json.Unmarshal(data, &members); err != nil {
		return v, fmt.Errorf("%w: %w", ErrDamaged, err)
	}
	if members == nil {
		return v, fmt.Errorf("%w: null is not an object", ErrDamaged)
	}
	raw, ok := members[versionKey]
	if !ok {
		return v, fmt.Errorf("%w: no version, want %d", ErrVersion, f.Version)
	}
	var version int
	if err := json.Unmarshal(raw, &version); err != nil {
		return v, fmt.Errorf("%w: version %s: %w", ErrDamaged, raw, err)
	}
	if version != f.Version {
		return v, fmt.Errorf("%w: version %d, want %d", ErrVersion, version, f.Version)
	}
	// The payload does not know the version; a strict decode must not see it.
	delete(members, versionKey)
	rest, err := json.Marshal(members)
	if err != nil {
		return v, fmt.Errorf("%w: %w", ErrDamaged, err)
	}
	dec := json.NewDecoder(bytes.NewReader(rest))
	if f.Strict {
		dec.DisallowUnknownFields()
	}
	if err := dec.Decode(&v); err != nil {
		var none T // not what a refused file half decoded to
		return none, fmt.Errorf("%w: %w", ErrDamaged, err)
	}
	return v, nil
}

// Encode returns what Save writes for v: {"version":N, then v's members}. An encoding
// past the bound is an error wrapping fsutil.ErrTooLarge.
func (f File[T]) Encode(v T) ([]byte, error) {
	if f.Limit <= 0 {
		return nil, fmt.Errorf("encoding %s: no bound set", f.Path)
	}
	payload, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encoding %s: %w", f.Path, err)
	}
	if len(payload) < 2 || payload[0] != '{' || payload[len(payload)-1] != '}' {
		return nil, fmt.Errorf("encoding %s: the payload %T is not a JSON object", f.Path, v)
	}
	data := make([]byte, 0, len(payload)+len(`{"version":,`)+20)
	data = append(data, `{"`+versionKey+`":`...)
	data = strconv.AppendInt(data, int64(f.Version), 10)
	if len(payload) > 2 { // members besides the version
		data = append(data, ',')
	}
	data = append(data, payload[1:]...)
	if int64(len(data)) > f.Limit {
		return nil, fmt.Errorf("encoding %s: %d bytes, %w of %d", f.Path, len(data), fsutil.ErrTooLarge, f.Limit)
	}
	return data, nil
}

// Save replaces the file with v (Encode), atomically, readable by its owner only.
func (f File[T]) Save(v T) error {
	data, err := f.Encode(v)
	if err != nil {
		return err
	}
	return f.Write(data)
}

// Write replaces the file with data, which Encode returned, atomically, readable by its
// owner only: for a store that compares the encoding with the file's before it writes.
func (f File[T]) Write(data []byte) error {
	if err := fsutil.WriteFileAtomic(f.Path, data, 0o600); err != nil {
		return fmt.Errorf("writing %s: %w", f.Path, err)
	}
	return nil
}

// RemoveTemps removes the temporary files a write killed mid-way left beside the file,
// and returns how many it removed. Call it at start, before the first Save.
func (f File[T]) RemoveTemps() (int, error) { return fsutil.RemoveStaleTemps(f.Path) }

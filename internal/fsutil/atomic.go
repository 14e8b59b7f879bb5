// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

// Package fsutil holds the small file-system helpers numapref's state files need.
package fsutil

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Errors of the state-file helpers, for errors.Is.
var (
	// ErrSymlink means a state file's path is a symbolic link. The agent's state files are
	// never links; one that is was put there by someone else, to make the agent read or
	// replace another file.
	ErrSymlink = errors.New("is a symbolic link")
	// ErrTooLarge means a state file is larger than its bound.
	ErrTooLarge = errors.New("larger than its bound")
)

// WriteFileAtomic replaces path with data so that a reader, or the next start after a
// crash, sees either the old content or the new, never a mix: write a temporary file in
// the same directory, fsync it, rename it over path, fsync the directory. It refuses (with
// ErrSymlink) to replace a symbolic link at path. A crash can leave the temporary file
// behind; RemoveStaleTemps removes such files.
func WriteFileAtomic(path string, data []byte, perm os.FileMode) error {
	if st, err := os.Lstat(path); err == nil && st.Mode()&fs.ModeSymlink != 0 {
		return fmt.Errorf("replacing %s: %w", path, ErrSymlink)
	}
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, tempPrefix(path)+"*")
	if err != nil {
		return fmt.Errorf("creating temporary file for %s: %w", path, err)
	}
	name := tmp.Name()
	defer os.Remove(name) // a no-op once renamed
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("writing %s: %w", name, err)
	}
	if err := tmp.Chmod(perm); err != nil {
		tmp.Close()
		return fmt.Errorf("setting mode of %s: %w", name, err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("syncing %s: %w", name, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("closing %s: %w", name, err)
	}
	if err := os.Rename(name, path); err != nil {
		return fmt.Errorf("replacing %s: %w", path, err)
	}
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("opening %s to sync it: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("syncing %s: %w", dir, err)
	}
	return nil
}

// tempPrefix is how the names of WriteFileAtomic's temporary files for path begin.
func tempPrefix(path string) string { return "." + filepath.Base(path) + ".tmp-" }

// RemoveStaleTemps removes the temporary files WriteFileAtomic left beside path when the
// process died mid-write, and returns how many it removed. Call it at start, before any
// write to path. A missing directory has none.
func RemoveStaleTemps(path string) (int, error) {
	dir, prefix := filepath.Dir(path), tempPrefix(path)
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("listing %s for stale temporary files: %w", dir, err)
	}
	n := 0
	var errs []error
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), prefix) || !e.Type().IsRegular() {
			continue
		}
		if err := os.Remove(filepath.Join(dir, e.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
			continue
		}
		n++
	}
	return n, errors.Join(errs...)
}

// ReadStateFile returns the contents of path, which must be a regular file of at most
// limit bytes. It does not follow a symbolic link at path (ErrSymlink) and refuses a
// larger file (ErrTooLarge) without reading past the bound. A missing file yields an error
// wrapping fs.ErrNotExist.
func ReadStateFile(path string, limit int64) ([]byte, error) {
	before, err := os.Lstat(path)
	if err != nil {
		return nil, err
	}
	if before.Mode()&fs.ModeSymlink != 0 {
		return nil, fmt.Errorf("reading %s: %w", path, ErrSymlink)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	switch {
	case !os.SameFile(before, st): // replaced (by a link?) between the two looks
		return nil, fmt.Errorf("reading %s: replaced while it was opened", path)
	case !st.Mode().IsRegular():
		return nil, fmt.Errorf("reading %s: not a regular file (%s)", path, st.Mode().Type())
	case st.Size() > limit:
		return nil, fmt.Errorf("reading %s: %d bytes, %w of %d", path, st.Size(), ErrTooLarge, limit)
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	if int64(len(data)) > limit { // grew after the stat
		return nil, fmt.Errorf("reading %s: more than %d bytes, %w", path, limit, ErrTooLarge)
	}
	return data, nil
}

// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package fsutil

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestWriteFileAtomic(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "ledger.json")
	for _, content := range []string{"first", "second"} {
		if err := WriteFileAtomic(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		got, err := ReadStateFile(path, 100)
		if err != nil || string(got) != content {
			t.Errorf("after writing %q: read %q, %v", content, got, err)
		}
	}
	if st, err := os.Stat(path); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, %v; want 0600", st.Mode(), err)
	}
	if names := dirNames(t, dir); !slices.Equal(names, []string{"ledger.json"}) {
		t.Errorf("directory holds %v, want only the file", names)
	}
}

// A state file that is a symbolic link was made by someone else: it is neither read
// through nor replaced.
func TestStateFilesRefuseSymlinks(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "elsewhere")
	if err := os.WriteFile(target, []byte("not a ledger"), 0o644); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "ledger.json")
	if err := os.Symlink(target, path); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadStateFile(path, 100); !errors.Is(err, ErrSymlink) {
		t.Errorf("ReadStateFile through a link = %v, want ErrSymlink", err)
	}
	if err := WriteFileAtomic(path, []byte("x"), 0o600); !errors.Is(err, ErrSymlink) {
		t.Errorf("WriteFileAtomic over a link = %v, want ErrSymlink", err)
	}
	if got, _ := os.ReadFile(target); string(got) != "not a ledger" {
		t.Errorf("the link's target now holds %q", got)
	}
	if st, err := os.Lstat(path); err != nil || st.Mode()&fs.ModeSymlink == 0 {
		t.Errorf("the link was replaced: %v, %v", st.Mode(), err)
	}
}

func TestReadStateFileBounds(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state.json")
	if err := os.WriteFile(path, []byte("0123456789"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, err := ReadStateFile(path, 10); err != nil || string(got) != "0123456789" {
		t.Errorf("at the bound: %q, %v", got, err)
	}
	if _, err := ReadStateFile(path, 9); !errors.Is(err, ErrTooLarge) {
		t.Errorf("past the bound: %v, want ErrTooLarge", err)
	}
	if _, err := ReadStateFile(filepath.Join(dir, "missing"), 10); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing: %v, want fs.ErrNotExist", err)
	}
	if _, err := ReadStateFile(dir, 10); err == nil {
		t.Error("a directory: no error")
	}
}

// A writer killed between creating its temporary file and renaming it leaves the file;
// the next start removes it, and nothing else.
func TestRemoveStaleTemps(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "ledger.json")
	for _, name := range []string{"ledger.json", ".ledger.json.tmp-123", ".ledger.json.tmp-", ".desired.json.tmp-9", "ledger.json.tmp-5"} {
		if err := os.WriteFile(filepath.Join(dir, name), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, ".ledger.json.tmp-dir"), 0o700); err != nil {
		t.Fatal(err)
	}
	n, err := RemoveStaleTemps(path)
	if err != nil || n != 2 {
		t.Errorf("RemoveStaleTemps = %d, %v; want 2 removed", n, err)
	}
	want := []string{".desired.json.tmp-9", ".ledger.json.tmp-dir", "ledger.json", "ledger.json.tmp-5"}
	if names := dirNames(t, dir); !slices.Equal(names, want) {
		t.Errorf("left %v, want %v", names, want)
	}
	if n, err := RemoveStaleTemps(filepath.Join(dir, "absent", "ledger.json")); n != 0 || err != nil {
		t.Errorf("in a missing directory: %d, %v", n, err)
	}
}

func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

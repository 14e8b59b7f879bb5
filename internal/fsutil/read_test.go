// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package fsutil

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

func TestReadFileInto(t *testing.T) {
	dir := t.TempDir()
	small := []byte("0-3\n")
	large := bytes.Repeat([]byte("12345\n"), 3000) // past any first buffer
	for name, data := range map[string][]byte{"small": small, "large": large, "empty": {}} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	for _, name := range []string{"small", "large", "empty"} {
		want, _ := os.ReadFile(filepath.Join(dir, name))
		got, err := ReadFileInto(filepath.Join(dir, name), nil)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("ReadFileInto(%s, nil) = %d bytes, %v; want %d bytes", name, len(got), err, len(want))
		}
	}

	// A caller's buffer is reused, grown, and left holding the last contents read.
	buf := make([]byte, 0, 8192)
	got, err := ReadFileInto(filepath.Join(dir, "small"), &buf)
	if err != nil || !bytes.Equal(got, small) || !bytes.Equal(buf, small) || cap(buf) != 8192 {
		t.Errorf("small into buffer: %q, %v (*buf %q, cap %d); want %q in the caller's buffer", got, err, buf, cap(buf), small)
	}
	got, err = ReadFileInto(filepath.Join(dir, "large"), &buf)
	if err != nil || !bytes.Equal(got, large) || !bytes.Equal(buf, large) {
		t.Errorf("large into buffer: %d bytes, %v; want %d bytes, also in *buf", len(got), err, len(large))
	}

	_, err = ReadFileInto(filepath.Join(dir, "missing"), &buf)
	var pathErr *fs.PathError
	if !errors.Is(err, fs.ErrNotExist) || !errors.As(err, &pathErr) {
		t.Errorf("missing file: error %v (%T), want a *fs.PathError wrapping fs.ErrNotExist", err, err)
	}
	if _, err := ReadFileInto(dir, nil); err == nil {
		t.Error("reading a directory: no error")
	}
}

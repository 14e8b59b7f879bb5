// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package numa

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

func TestReadBootID(t *testing.T) {
	proc := t.TempDir()
	if _, err := ReadBootID(proc); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("without the file: %v, want fs.ErrNotExist", err)
	}
	path := filepath.Join(proc, "sys", "kernel", "random", "boot_id")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("0b1e8cc2-55f4-4b68-9a5e-5c1a0cbbd0a4\n"), 0o444); err != nil {
		t.Fatal(err)
	}
	if id, err := ReadBootID(proc); err != nil || id != "0b1e8cc2-55f4-4b68-9a5e-5c1a0cbbd0a4" {
		t.Errorf("ReadBootID = %q, %v", id, err)
	}
	if id, err := ReadBootID("/proc"); err != nil || len(id) != 36 {
		t.Errorf("this machine's boot id: %q, %v", id, err)
	}
}

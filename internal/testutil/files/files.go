// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

// Package files holds the file helpers tests of several packages share.
package files

import (
	"os"
	"path/filepath"
	"testing"
)

// Write writes content to path, making its parent directories, or fails the test.
func Write(t testing.TB, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// Stat returns path's FileInfo, or fails the test.
func Stat(t testing.TB, path string) os.FileInfo {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

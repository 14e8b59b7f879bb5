// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build host && linux

package main

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"testing"
)

// rssFileKiB is this process's RssFile (proc(5)), in KiB.
func rssFileKiB(t *testing.T) int {
	t.Helper()
	f, err := os.Open("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if v, ok := strings.CutPrefix(s.Text(), "RssFile:"); ok {
			kib, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			if err != nil {
				t.Fatalf("RssFile %q: %v", v, err)
			}
			return kib
		}
	}
	t.Fatal("no RssFile in /proc/self/status")
	return 0
}

// TestPageOutExecutableOnThisHost pages out this test binary's own text and read-only
// data on this machine's kernel: its file-backed resident set, the start's pages among
// it, falls to less than half, and the process goes on running from the file.
func TestPageOutExecutableOnThisHost(t *testing.T) {
	before := rssFileKiB(t)
	n, err := pageOutExecutable("/proc/self/exe", "/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	after := rssFileKiB(t)
	t.Logf("advised %d MiB; RssFile %d KiB before, %d KiB after", n>>20, before, after)
	if n <= 0 {
		t.Fatalf("advised %d bytes", n)
	}
	if after*2 > before {
		t.Fatalf("RssFile %d KiB after the page-out, %d KiB before: want less than half", after, before)
	}
}

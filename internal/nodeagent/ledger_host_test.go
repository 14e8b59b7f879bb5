// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build host && linux

package nodeagent

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"golang.org/x/sys/unix"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
	"github.com/numapref/numapref/internal/nodeagent/desire"
	"github.com/numapref/numapref/internal/testutil/testenv"
)

// mountTmpfs mounts a tmpfs of the given size ("64k") on a new directory of the test and
// unmounts it when the test ends (before the directory is removed).
func mountTmpfs(t *testing.T, size string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "state")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "size="+size+",mode=0700")
	testenv.RequireNoError(t, err, "mounting a tmpfs (CAP_SYS_ADMIN)", "sudo make host")
	t.Cleanup(func() {
		if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
			t.Errorf("unmounting %s: %v", dir, err)
		}
	})
	return dir
}

// fill writes zeros to a file in dir until its file system is full.
func fill(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "filler")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 4096)
	for {
		if _, err := f.Write(buf); errors.Is(err, unix.ENOSPC) {
			return path
		} else if err != nil {
			t.Fatal(err)
		}
	}
}

// On a full state file system and on a read-only one, the ledger cannot be written ahead:
// the pass sets nothing, reports LedgerError and counts the failure; once the file system
// takes writes again the next pass applies.
func TestEngineLedgerOnAFullOrReadOnlyDisk(t *testing.T) {
	tests := map[string]struct {
		spoil, mend func(t *testing.T, dir string)
		wantErr     string
	}{
		"full": {
			spoil:   func(t *testing.T, dir string) { fill(t, dir) },
			mend:    func(t *testing.T, dir string) { os.Remove(filepath.Join(dir, "filler")) },
			wantErr: "no space left on device",
		},
		"read-only": {
			spoil:   func(t *testing.T, dir string) { remount(t, dir, unix.MS_RDONLY) },
			mend:    func(t *testing.T, dir string) { remount(t, dir, 0) },
			wantErr: "read-only file system",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			el := newEngineLab(t)
			dir := mountTmpfs(t, "64k")
			el.ledger = filepath.Join(dir, "ledger.json")
			w, _, d := el.container(t, "a", 0, 2)
			m := NewMetrics()
			e := el.engineWith(t, EngineConfig{Metrics: m})
			tc.spoil(t, dir)

			e.SetDesired([]desire.Desire{d})
			e.Pass()
			r := e.Results()[d.Key()]
			if r.Reason != numav1.ReasonLedgerError || !strings.Contains(r.Message, tc.wantErr) {
				t.Errorf("result %s: %q; want LedgerError with %q", r.Reason, r.Message, tc.wantErr)
			}
			if v := el.values(t, w.Pid()); !allEqual(v, -1) {
				t.Errorf("tasks hold %v without a ledger entry, want all -1", v)
			}
			if n := testutil.ToFloat64(m.LedgerErrs); n != 1 {
				t.Errorf("numapref_ledger_write_errors_total = %v, want 1", n)
			}

			tc.mend(t, dir)
			if v := el.settle(t, e, w.Pid()); !allEqual(v, 0) {
				t.Fatalf("after the disk took writes again, tasks hold %v; want all 0", v)
			}
			if r := e.Results()[d.Key()]; r.Reason != numav1.ReasonApplied {
				t.Errorf("result %s (%s), want Applied", r.Reason, r.Message)
			}
			if l, err := readLedger(el.ledger); err != nil || l[d.Key()] == nil {
				t.Errorf("ledger %v, %v; want the container", l, err)
			}
		})
	}
}

// remount remounts the tmpfs at dir with flags (MS_RDONLY, or 0 for read-write).
func remount(t *testing.T, dir string, flags uintptr) {
	t.Helper()
	if err := unix.Mount("", dir, "", unix.MS_REMOUNT|unix.MS_NOSUID|unix.MS_NODEV|flags, ""); err != nil {
		t.Fatalf("remounting %s: %v", dir, err)
	}
}

// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package tune

import (
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/numapref/numapref/internal/numa"
)

// tuneTree makes a fake /proc and debugfs with the kernel's defaults and returns their
// roots: procRoot/sys/kernel/numa_balancing and debugfsRoot/sched/numa_balancing/*.
func tuneTree(t *testing.T, oldSysctls bool) (procRoot, debugfsRoot string) {
	t.Helper()
	root := t.TempDir()
	procRoot, debugfsRoot = filepath.Join(root, "proc"), filepath.Join(root, "debug")
	knobDir, prefix := filepath.Join(debugfsRoot, "sched", "numa_balancing"), ""
	if oldSysctls {
		knobDir, prefix = filepath.Join(procRoot, "sys", "kernel"), "numa_balancing_"
	}
	files := map[string]string{
		filepath.Join(procRoot, "sys", "kernel", "numa_balancing"): "0\n",
		filepath.Join(knobDir, prefix+"scan_delay_ms"):             "1000\n",
		filepath.Join(knobDir, prefix+"scan_period_min_ms"):        "1000\n",
		filepath.Join(knobDir, prefix+"scan_period_max_ms"):        "60000\n",
		filepath.Join(knobDir, prefix+"scan_size_mb"):              "256\n",
	}
	for path, content := range files {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return procRoot, debugfsRoot
}

// treeValues reads every setting back: mode, delay, min, max, size.
func treeValues(t *testing.T, procRoot, debugfsRoot string) []string {
	t.Helper()
	mode, err := numa.ReadBalancing(procRoot)
	if err != nil {
		t.Fatal(err)
	}
	k, err := numa.ReadScanKnobs(procRoot, debugfsRoot)
	if err != nil {
		t.Fatal(err)
	}
	return []string{mode.String(), u(k.ScanDelayMs), u(k.ScanPeriodMinMs), u(k.ScanPeriodMaxMs), u(k.ScanSizeMB)}
}

func u(v uint32) string { return strconv.FormatUint(uint64(v), 10) }

func p64(v uint64) *uint64 { return &v }

// The seed's "no faulting" settings: balancing on, both periods and the delay at the u32
// maximum. Every setting is reported with its old and new value, and only those that
// differ are written.
func TestApplyTuningNoFaulting(t *testing.T) {
	for name, old := range map[string]bool{"debugfs": false, "old sysctls": true} {
		t.Run(name, func(t *testing.T) {
			procRoot, debugfsRoot := tuneTree(t, old)
			tuning := BalancingTuning{Mode: p64(1), ScanDelayMs: p64(4294967295), ScanPeriodMinMs: p64(4294967295),
				ScanPeriodMaxMs: p64(4294967295), ScanSizeMB: p64(256)}
			changes, err := ApplyTuning(procRoot, debugfsRoot, tuning)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, c := range changes {
				got = append(got, c.Setting+" "+c.From+"->"+c.To+" "+boolWord(c.Changed()))
			}
			want := []string{
				"numa_balancing.scan_delay_ms 1000->4294967295 changed",
				"numa_balancing.scan_period_min_ms 1000->4294967295 changed",
				"numa_balancing.scan_period_max_ms 60000->4294967295 changed",
				"numa_balancing.scan_size_mb 256->256 unchanged",
				"kernel.numa_balancing 0->1 changed",
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("changes (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff([]string{"normal", "4294967295", "4294967295", "4294967295", "256"}, treeValues(t, procRoot, debugfsRoot)); diff != "" {
				t.Errorf("kernel values (-want +got):\n%s", diff)
			}
		})
	}
}

// Out-of-range and inconsistent values are refused with a message naming each, and
// nothing is written, not even the valid ones.
func TestApplyTuningRefusesAndWritesNothing(t *testing.T) {
	tests := map[string]struct {
		tuning   BalancingTuning
		wantErrs []string
	}{
		"period above u32": {
			tuning:   BalancingTuning{Mode: p64(1), ScanPeriodMaxMs: p64(4294967296)},
			wantErrs: []string{"scan-period-max-ms 4294967296 is out of range 0..4294967295"},
		},
		"mode 4": {
			tuning:   BalancingTuning{Mode: p64(4), ScanDelayMs: p64(10)},
			wantErrs: []string{"numa-balancing 4 is out of range"},
		},
		"scan size 0": {
			tuning:   BalancingTuning{Mode: p64(1), ScanSizeMB: p64(0)},
			wantErrs: []string{"scan-size-mb 0 is out of range 1..4294967295", "set numa-balancing 0"},
		},
		"every problem at once": {
			tuning:   BalancingTuning{Mode: p64(9), ScanDelayMs: p64(1 << 40), ScanSizeMB: p64(0)},
			wantErrs: []string{"numa-balancing 9", "scan-delay-ms 1099511627776", "scan-size-mb 0"},
		},
		"min above the current max": {
			tuning:   BalancingTuning{Mode: p64(1), ScanPeriodMinMs: p64(90000)},
			wantErrs: []string{"scan-period-min-ms 90000 would exceed scan-period-max-ms 60000"},
		},
		"max below the new min": {
			tuning:   BalancingTuning{ScanPeriodMinMs: p64(5000), ScanPeriodMaxMs: p64(4000)},
			wantErrs: []string{"scan-period-min-ms 5000 would exceed scan-period-max-ms 4000"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			procRoot, debugfsRoot := tuneTree(t, false)
			before := treeValues(t, procRoot, debugfsRoot)
			changes, err := ApplyTuning(procRoot, debugfsRoot, tc.tuning)
			if err == nil {
				t.Fatalf("ApplyTuning(%+v) = %v, want an error", tc.tuning, changes)
			}
			if !strings.Contains(err.Error(), "refused, nothing written") {
				t.Errorf("error %q does not say nothing was written", err)
			}
			for _, want := range tc.wantErrs {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not contain %q", err, want)
				}
			}
			if diff := cmp.Diff(before, treeValues(t, procRoot, debugfsRoot)); diff != "" {
				t.Errorf("the kernel's values changed (-before +after):\n%s", diff)
			}
		})
	}
}

// A write that fails half-way (here kernel.numa_balancing, written last) puts back the
// knobs written before it: the kernel keeps all the old values.
func TestApplyTuningRollsBackAFailedWrite(t *testing.T) {
	procRoot, debugfsRoot := tuneTree(t, false)
	modeFile := filepath.Join(procRoot, "sys", "kernel", "numa_balancing")
	before := treeValues(t, procRoot, debugfsRoot)
	open := openSetting
	openSetting = func(path string) (*os.File, error) {
		if path == modeFile {
			return nil, fs.ErrPermission
		}
		return open(path)
	}
	defer func() { openSetting = open }()
	_, err := ApplyTuning(procRoot, debugfsRoot, BalancingTuning{Mode: p64(1), ScanSizeMB: p64(512), ScanDelayMs: p64(7)})
	if err == nil || !strings.Contains(err.Error(), "writing kernel.numa_balancing=1") || !strings.Contains(err.Error(), "earlier writes were put back") {
		t.Fatalf("err = %v, want the failed write and the rollback", err)
	}
	if diff := cmp.Diff(before, treeValues(t, procRoot, debugfsRoot)); diff != "" {
		t.Errorf("values after the rollback (-before +after):\n%s", diff)
	}
}

// Changing only the mode needs no debugfs.
func TestApplyTuningModeWithoutDebugfs(t *testing.T) {
	procRoot, _ := tuneTree(t, false)
	changes, err := ApplyTuning(procRoot, filepath.Join(t.TempDir(), "not-mounted"), BalancingTuning{Mode: p64(1)})
	if err != nil || len(changes) != 1 || !changes[0].Changed() {
		t.Fatalf("ApplyTuning(mode 1) = %+v, %v; want one change", changes, err)
	}
	_, err = ApplyTuning(procRoot, filepath.Join(t.TempDir(), "not-mounted"), BalancingTuning{ScanDelayMs: p64(1)})
	if err == nil || !strings.Contains(err.Error(), "is debugfs mounted") {
		t.Fatalf("knobs without debugfs: err = %v, want a refusal naming debugfs", err)
	}
}

func boolWord(changed bool) string {
	if changed {
		return "changed"
	}
	return "unchanged"
}

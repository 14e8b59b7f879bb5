// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package numa

import (
	"errors"
	"io/fs"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestReadBalancing(t *testing.T) {
	tests := map[string]struct {
		procRoot    string
		want        BalancingMode
		wantName    string
		wantLabel   string
		wantEnabled bool
		wantMissing bool
	}{
		"disabled":       {procRoot: "testdata/proc/unpatched", want: BalancingDisabled, wantName: "disabled", wantLabel: "disabled"},
		"normal":         {procRoot: "testdata/proc/patched", want: BalancingNormal, wantName: "normal", wantLabel: "normal", wantEnabled: true},
		"memory tiering": {procRoot: "testdata/proc/tiering", want: BalancingMemoryTiering, wantName: "memory-tiering", wantLabel: "memory-tiering"},
		"both":           {procRoot: "testdata/proc/both", want: 3, wantName: "normal+memory-tiering", wantLabel: "normal-memory-tiering", wantEnabled: true},
		"not built in":   {procRoot: "testdata/proc/no-numa-balancing", wantMissing: true, wantName: "disabled", wantLabel: "disabled"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ReadBalancing(tc.procRoot)
			if tc.wantMissing != errors.Is(err, fs.ErrNotExist) || (!tc.wantMissing && err != nil) {
				t.Fatalf("error %v, want missing %v", err, tc.wantMissing)
			}
			type view struct {
				Mode    BalancingMode
				Name    string
				Label   string
				Enabled bool
			}
			want := view{tc.want, tc.wantName, tc.wantLabel, tc.wantEnabled}
			if diff := cmp.Diff(want, view{got, got.String(), got.Label(), got.Enabled()}); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseBalancing(t *testing.T) {
	tests := map[string]struct {
		in      string
		want    BalancingMode
		wantErr bool
	}{
		"0":        {in: "0\n", want: 0},
		"3":        {in: "3", want: 3},
		"4":        {in: "4", wantErr: true},
		"negative": {in: "-1", wantErr: true},
		"empty":    {in: "", wantErr: true},
		"word":     {in: "on", wantErr: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ParseBalancing(tc.in)
			if (err != nil) != tc.wantErr {
				t.Fatalf("error %v, want error %v", err, tc.wantErr)
			}
			if got != tc.want {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
	if got := BalancingMode(9).String(); got != "unknown(9)" {
		t.Errorf("String of 9 = %q", got)
	}
	if got := BalancingMode(9).Label(); got != "unknown" {
		t.Errorf("Label of 9 = %q", got)
	}
}

func TestReadScanKnobs(t *testing.T) {
	tests := map[string]struct {
		procRoot, debugfsRoot string
		want                  ScanKnobs
		wantErr               error
	}{
		"debugfs": {
			procRoot: "testdata/proc/unpatched", debugfsRoot: "testdata/debugfs/default",
			want: ScanKnobs{Source: "testdata/debugfs/default/sched/numa_balancing", ScanDelayMs: 1000,
				ScanPeriodMinMs: 1000, ScanPeriodMaxMs: 60000, ScanSizeMB: 256},
		},
		"faults switched off": {
			procRoot: "testdata/proc/unpatched", debugfsRoot: "testdata/debugfs/no-faults",
			want: ScanKnobs{Source: "testdata/debugfs/no-faults/sched/numa_balancing", ScanDelayMs: 4294967295,
				ScanPeriodMinMs: 4294967295, ScanPeriodMaxMs: 4294967295, ScanSizeMB: 256},
		},
		"sysctls before 5.13": {
			procRoot: "testdata/proc/old-kernel", debugfsRoot: "testdata/debugfs/absent",
			want: ScanKnobs{Source: "testdata/proc/old-kernel/sys/kernel", ScanDelayMs: 1000,
				ScanPeriodMinMs: 1000, ScanPeriodMaxMs: 60000, ScanSizeMB: 256},
		},
		"debugfs not mounted": {
			procRoot: "testdata/proc/unpatched", debugfsRoot: "testdata/debugfs/absent",
			wantErr: fs.ErrNotExist,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ReadScanKnobs(tc.procRoot, tc.debugfsRoot)
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil && err != nil) {
				t.Fatalf("error %v, want %v", err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func FuzzParseBalancing(f *testing.F) {
	for _, s := range []string{"0", "1\n", "3", "-1", " 2 ", "4294967296"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if m, err := ParseBalancing(s); err == nil && (m < 0 || m > 3) {
			t.Errorf("ParseBalancing(%q) = %d", s, m)
		}
		_, _ = ParseScanKnob(s)
	})
}

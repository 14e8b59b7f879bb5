// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// fakeHost is a host root with /proc/sys/kernel/numa_balancing and debugfs's scan knobs at
// the kernel's defaults.
func fakeHost(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	files := map[string]string{
		"proc/sys/kernel/numa_balancing":                           "0\n",
		"sys/kernel/debug/sched/numa_balancing/scan_delay_ms":      "1000\n",
		"sys/kernel/debug/sched/numa_balancing/scan_period_min_ms": "1000\n",
		"sys/kernel/debug/sched/numa_balancing/scan_period_max_ms": "60000\n",
		"sys/kernel/debug/sched/numa_balancing/scan_size_mb":       "256\n",
	}
	for name, content := range files {
		path := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func numaprefCommand(args ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "NUMAPREF_RUN_MAIN=1")
	return cmd
}

func read(t *testing.T, root, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, name))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// The values it changed are logged with their old and new values, and written.
func TestTuneBalancingLogsWhatItChanged(t *testing.T) {
	root := fakeHost(t)
	out, err := numaprefCommand("tune-balancing", "-host-root", root, "-numa-balancing=1",
		"-scan-delay-ms=4294967295", "-scan-period-min-ms=4294967295", "-scan-period-max-ms=4294967295").CombinedOutput()
	if err != nil {
		t.Fatalf("tune-balancing: %v\n%s", err, out)
	}
	for _, want := range []string{
		`"setting":"kernel.numa_balancing","from":"0","to":"1"`,
		`"setting":"numa_balancing.scan_period_max_ms","from":"60000","to":"4294967295"`,
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output lacks %s:\n%s", want, out)
		}
	}
	if got := read(t, root, "proc/sys/kernel/numa_balancing"); got != "1" {
		t.Errorf("numa_balancing = %s, want 1", got)
	}
	if got := read(t, root, "sys/kernel/debug/sched/numa_balancing/scan_delay_ms"); got != "4294967295" {
		t.Errorf("scan_delay_ms = %s, want 4294967295", got)
	}
}

// An out-of-range value fails the command with a message that names it, and nothing is
// written, the valid values included.
func TestTuneBalancingRefusesOutOfRange(t *testing.T) {
	tests := map[string]struct {
		args []string
		want string
	}{
		"above u32":    {[]string{"-numa-balancing=1", "-scan-period-max-ms=4294967296"}, "scan-period-max-ms 4294967296 is out of range 0..4294967295"},
		"negative":     {[]string{"-numa-balancing=1", "-scan-delay-ms=-1"}, `"-1" is not a non-negative whole number`},
		"mode":         {[]string{"-numa-balancing=7", "-scan-delay-ms=5"}, "numa-balancing 7 is out of range"},
		"min over max": {[]string{"-numa-balancing=1", "-scan-period-min-ms=70000"}, "would exceed scan-period-max-ms 60000"},
		"nothing":      {nil, "nothing to set"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			root := fakeHost(t)
			out, err := numaprefCommand(append([]string{"tune-balancing", "-host-root", root}, tc.args...)...).CombinedOutput()
			if err == nil {
				t.Fatalf("tune-balancing %v succeeded:\n%s", tc.args, out)
			}
			if !strings.Contains(string(out), tc.want) {
				t.Errorf("output lacks %q:\n%s", tc.want, out)
			}
			if got := read(t, root, "proc/sys/kernel/numa_balancing"); got != "0" {
				t.Errorf("numa_balancing = %s after a refusal, want 0", got)
			}
			if got := read(t, root, "sys/kernel/debug/sched/numa_balancing/scan_delay_ms"); got != "1000" {
				t.Errorf("scan_delay_ms = %s after a refusal, want 1000", got)
			}
		})
	}
}

// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package numa

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// BalancingMode is the value of the kernel.numa_balancing sysctl, a bit mask.
type BalancingMode int

const (
	// BalancingDisabled: no automatic NUMA balancing.
	BalancingDisabled BalancingMode = 0
	// BalancingNormal (NUMA_BALANCING_NORMAL): scan tasks, migrate pages and tasks between nodes.
	BalancingNormal BalancingMode = 1
	// BalancingMemoryTiering (NUMA_BALANCING_MEMORY_TIERING): promote hot pages from slow
	// memory tiers.
	BalancingMemoryTiering BalancingMode = 2
)

// String names the mode: "disabled", "normal", "memory-tiering", "normal+memory-tiering".
func (m BalancingMode) String() string {
	switch m {
	case BalancingDisabled:
		return "disabled"
	case BalancingNormal:
		return "normal"
	case BalancingMemoryTiering:
		return "memory-tiering"
	case BalancingNormal | BalancingMemoryTiering:
		return "normal+memory-tiering"
	}
	return fmt.Sprintf("unknown(%d)", int(m))
}

// Enabled reports whether NUMA balancing runs in its normal mode, the one that places
// tasks on their preferred node and migrates their pages there. Memory tiering alone does
// not scan top-tier memory, so it does not act on the preferred node.
func (m BalancingMode) Enabled() bool { return m&BalancingNormal != 0 }

// Label names the mode in a form valid as a Kubernetes label value: "disabled", "normal",
// "memory-tiering", "normal-memory-tiering" (or "unknown").
func (m BalancingMode) Label() string {
	switch m {
	case BalancingDisabled, BalancingNormal, BalancingMemoryTiering:
		return m.String()
	case BalancingNormal | BalancingMemoryTiering:
		return "normal-memory-tiering"
	}
	return "unknown"
}

// ReadBalancing reads procRoot/sys/kernel/numa_balancing. A kernel built without
// CONFIG_NUMA_BALANCING has no such file: the error then wraps os.ErrNotExist.
func ReadBalancing(procRoot string) (BalancingMode, error) {
	path := filepath.Join(procRoot, "sys", "kernel", "numa_balancing")
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("reading kernel.numa_balancing: %w", err)
	}
	m, err := ParseBalancing(string(data))
	if err != nil {
		return 0, fmt.Errorf("reading kernel.numa_balancing: %w", err)
	}
	return m, nil
}

// ParseBalancing parses the sysctl's text: 0, 1, 2 or 3.
func ParseBalancing(s string) (BalancingMode, error) {
	v, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil || v < 0 || v > 3 {
		return 0, fmt.Errorf("invalid numa_balancing value %q", strings.TrimSpace(s))
	}
	return BalancingMode(v), nil
}

// ScanKnobs are NUMA balancing's scan parameters. Since Linux 5.13 they live in debugfs
// (sched/numa_balancing/); older kernels had them as kernel.numa_balancing_scan_* sysctls.
// Setting the periods to 4294967295 ms stops the hinting faults, as the patch's author did.
type ScanKnobs struct {
	// Source is the directory they were read from.
	Source          string `json:"source"`
	ScanDelayMs     uint32 `json:"scanDelayMs"`
	ScanPeriodMinMs uint32 `json:"scanPeriodMinMs"`
	ScanPeriodMaxMs uint32 `json:"scanPeriodMaxMs"`
	ScanSizeMB      uint32 `json:"scanSizeMb"`
}

// ReadScanKnobs reads the scan knobs from debugfsRoot/sched/numa_balancing, or, when that
// directory does not exist, from the older sysctls under procRoot/sys/kernel. debugfs is
// often unmounted or readable by root only; the error then wraps the cause
// (os.ErrNotExist, os.ErrPermission).
func ReadScanKnobs(procRoot, debugfsRoot string) (ScanKnobs, error) {
	dir := filepath.Join(debugfsRoot, "sched", "numa_balancing")
	k, err := readScanKnobs(dir, "")
	if errors.Is(err, os.ErrNotExist) && procRoot != "" {
		if old, oldErr := readScanKnobs(filepath.Join(procRoot, "sys", "kernel"), "numa_balancing_"); oldErr == nil {
			return old, nil
		}
	}
	return k, err
}

func readScanKnobs(dir, prefix string) (ScanKnobs, error) {
	k := ScanKnobs{Source: dir}
	fields := []struct {
		name string
		dst  *uint32
	}{
		{"scan_delay_ms", &k.ScanDelayMs},
		{"scan_period_min_ms", &k.ScanPeriodMinMs},
		{"scan_period_max_ms", &k.ScanPeriodMaxMs},
		{"scan_size_mb", &k.ScanSizeMB},
	}
	for _, f := range fields {
		data, err := os.ReadFile(filepath.Join(dir, prefix+f.name))
		if err != nil {
			return ScanKnobs{}, fmt.Errorf("reading NUMA balancing scan knob: %w", err)
		}
		if *f.dst, err = ParseScanKnob(string(data)); err != nil {
			return ScanKnobs{}, fmt.Errorf("reading NUMA balancing scan knob %s: %w", f.name, err)
		}
	}
	return k, nil
}

// ParseScanKnob parses one knob's value, an unsigned 32-bit decimal.
func ParseScanKnob(s string) (uint32, error) {
	v, err := strconv.ParseUint(strings.TrimSpace(s), 10, 32)
	if err != nil {
		return 0, fmt.Errorf("invalid value %q", strings.TrimSpace(s))
	}
	return uint32(v), nil
}

// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

// Package tune changes NUMA balancing: kernel.numa_balancing and its scan knobs, as
// `numapref tune-balancing` does (ApplyTuning). It is the only code of numapref that writes
// a sysctl; it reads the current values through package numa.
package tune

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/numapref/numapref/internal/numa"
)

// BalancingTuning is a change of kernel.numa_balancing and NUMA balancing's scan knobs, as
// `numapref tune-balancing` applies it. A nil field is left as the kernel has it. Values are
// uint64 so that an out-of-range request reaches Validate and is refused there with a clear
// message instead of wrapping.
type BalancingTuning struct {
	Mode            *uint64
	ScanDelayMs     *uint64
	ScanPeriodMinMs *uint64
	ScanPeriodMaxMs *uint64
	ScanSizeMB      *uint64
}

// Change is one setting ApplyTuning looked at: From is what the kernel had, To what it
// has now (equal when nothing needed writing).
type Change struct {
	Setting string
	File    string
	From    string
	To      string
}

// Changed reports whether the setting was written.
func (c Change) Changed() bool { return c.From != c.To }

// knob is one tunable: its name as the tune-balancing flags and the debugfs file call it.
type knob struct {
	name     string // debugfs file name, also the old sysctl's suffix
	value    *uint64
	current  uint32
	min, max uint64
	why      string // said when a value is below min
}

// Validate checks every value against what the kernel accepts and against each other,
// using current for the values the tuning leaves alone. It returns every problem at once.
func (t BalancingTuning) Validate(current numa.ScanKnobs) error {
	var errs []error
	if t.Mode != nil && *t.Mode > uint64(numa.BalancingNormal|numa.BalancingMemoryTiering) {
		errs = append(errs, fmt.Errorf("numa-balancing %d is out of range: 0 (off), 1 (normal), 2 (memory tiering) or 3 (both)", *t.Mode))
	}
	for _, k := range t.knobs(current) {
		if k.value == nil {
			continue
		}
		if *k.value < k.min || *k.value > k.max {
			msg := fmt.Sprintf("%s %d is out of range %d..%d", flagName(k.name), *k.value, k.min, k.max)
			if k.why != "" && *k.value < k.min {
				msg += ": " + k.why
			}
			errs = append(errs, errors.New(msg))
		}
	}
	if len(errs) == 0 {
		lo, hi := pick(t.ScanPeriodMinMs, current.ScanPeriodMinMs), pick(t.ScanPeriodMaxMs, current.ScanPeriodMaxMs)
		if lo > hi {
			errs = append(errs, fmt.Errorf("scan-period-min-ms %d would exceed scan-period-max-ms %d", lo, hi))
		}
	}
	return errors.Join(errs...)
}

// SetsKnobs reports whether the tuning changes any scan knob (which needs debugfs).
func (t BalancingTuning) SetsKnobs() bool {
	return t.ScanDelayMs != nil || t.ScanPeriodMinMs != nil || t.ScanPeriodMaxMs != nil || t.ScanSizeMB != nil
}

func (t BalancingTuning) knobs(current numa.ScanKnobs) []knob {
	return []knob{
		{name: "scan_delay_ms", value: t.ScanDelayMs, current: current.ScanDelayMs, max: math.MaxUint32},
		{name: "scan_period_min_ms", value: t.ScanPeriodMinMs, current: current.ScanPeriodMinMs, max: math.MaxUint32},
		{name: "scan_period_max_ms", value: t.ScanPeriodMaxMs, current: current.ScanPeriodMaxMs, max: math.MaxUint32},
		{name: "scan_size_mb", value: t.ScanSizeMB, current: current.ScanSizeMB, min: 1, max: math.MaxUint32,
			why: "0 would stop the scanning without saying so; set numa-balancing 0 to turn balancing off"},
	}
}

func flagName(file string) string { return strings.ReplaceAll(file, "_", "-") }

func pick(v *uint64, current uint32) uint64 {
	if v != nil {
		return *v
	}
	return uint64(current)
}

// ApplyTuning validates t against the kernel's current values and, only if every value is
// valid, writes the ones that differ: the scan knobs first, then kernel.numa_balancing, so
// balancing starts with its new scan settings. A write that fails puts back the ones
// written before it, so the kernel keeps either all the new values or none. The knobs live
// in debugfsRoot/sched/numa_balancing (or the older kernel.numa_balancing_scan_* sysctls);
// the mode is procRoot/sys/kernel/numa_balancing. It returns every setting it looked at.
func ApplyTuning(procRoot, debugfsRoot string, t BalancingTuning) ([]Change, error) {
	modeFile := filepath.Join(procRoot, "sys", "kernel", "numa_balancing")
	var current numa.ScanKnobs
	if t.SetsKnobs() {
		var err error
		if current, err = numa.ReadScanKnobs(procRoot, debugfsRoot); err != nil {
			return nil, fmt.Errorf("refused, nothing written: the scan knobs cannot be read (is debugfs mounted at %s?): %w", debugfsRoot, err)
		}
	}
	if err := t.Validate(current); err != nil {
		return nil, fmt.Errorf("refused, nothing written: %w", err)
	}
	var plan []Change
	for _, k := range t.knobs(current) {
		if k.value == nil {
			continue
		}
		plan = append(plan, Change{Setting: "numa_balancing." + k.name, File: knobFile(current.Source, k.name),
			From: strconv.FormatUint(uint64(k.current), 10), To: strconv.FormatUint(*k.value, 10)})
	}
	if t.Mode != nil {
		mode, err := numa.ReadBalancing(procRoot)
		if err != nil {
			return nil, fmt.Errorf("refused, nothing written: %w", err)
		}
		plan = append(plan, Change{Setting: "kernel.numa_balancing", File: modeFile,
			From: strconv.Itoa(int(mode)), To: strconv.FormatUint(*t.Mode, 10)})
	}
	for i, c := range plan {
		if !c.Changed() {
			continue
		}
		if err := writeSetting(c.File, c.To); err != nil {
			return nil, errors.Join(fmt.Errorf("writing %s=%s: %w", c.Setting, c.To, err), rollback(plan[:i]))
		}
	}
	return plan, nil
}

// rollback puts back the settings of done that were written.
func rollback(done []Change) error {
	var errs []error
	for i := len(done) - 1; i >= 0; i-- {
		if c := done[i]; c.Changed() {
			if err := writeSetting(c.File, c.From); err != nil {
				errs = append(errs, fmt.Errorf("putting back %s=%s: %w", c.Setting, c.From, err))
			}
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("and the earlier writes could not all be put back: %w", errors.Join(errs...))
	}
	if len(done) > 0 {
		return errors.New("the earlier writes were put back")
	}
	return nil
}

// knobFile is a knob's file in dir: the debugfs name, or the old sysctl's with its prefix.
func knobFile(dir, name string) string {
	if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
		if old := filepath.Join(dir, "numa_balancing_"+name); fileExists(old) {
			return old
		}
	}
	return filepath.Join(dir, name)
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// writeSetting writes a sysctl or debugfs value in place (no temporary file: these are
// kernel files, where a write is the change itself).
func writeSetting(path, value string) error {
	f, err := openSetting(path)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(value + "\n"); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// openSetting opens a setting's file for writing; tests make it fail for one file.
var openSetting = func(path string) (*os.File, error) { return os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0) }

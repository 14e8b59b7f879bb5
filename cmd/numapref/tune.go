// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"errors"
	"flag"
	"fmt"
	"path/filepath"
	"strconv"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/numapref/numapref/internal/numa/tune"
)

// runTuneBalancing is `numapref tune-balancing`: it sets kernel.numa_balancing and the scan
// knobs, as the chart's opt-in init container does before the agent starts (the agent
// itself never writes them). Flags left out keep the kernel's value. Every value is checked
// before anything is written; each setting is logged with its old and new value.
func runTuneBalancing(args []string) error {
	fs := flag.NewFlagSet("tune-balancing", flag.ContinueOnError)
	hostRoot := fs.String("host-root", "/", "where the host's /proc is mounted")
	debugfsRoot := fs.String("debugfs-root", "", "where the host's debugfs is mounted (default <host-root>/sys/kernel/debug)")
	var t tune.BalancingTuning
	optionalUint(fs, &t.Mode, "numa-balancing", "kernel.numa_balancing: 0 off, 1 normal, 2 memory tiering, 3 both")
	optionalUint(fs, &t.ScanDelayMs, "scan-delay-ms", "sched/numa_balancing/scan_delay_ms: delay before a new task's first scan")
	optionalUint(fs, &t.ScanPeriodMinMs, "scan-period-min-ms", "sched/numa_balancing/scan_period_min_ms")
	optionalUint(fs, &t.ScanPeriodMaxMs, "scan-period-max-ms", "sched/numa_balancing/scan_period_max_ms (4294967295 for all three: the seed's \"no faulting\")")
	optionalUint(fs, &t.ScanSizeMB, "scan-size-mb", "sched/numa_balancing/scan_size_mb: MiB scanned per period, at least 1")
	zapOpts := zap.Options{}
	zapOpts.BindFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("tune-balancing: unexpected argument %q", fs.Arg(0))
	}
	if t == (tune.BalancingTuning{}) {
		return errors.New("tune-balancing: nothing to set: give -numa-balancing or a -scan-* flag")
	}
	if *debugfsRoot == "" {
		*debugfsRoot = filepath.Join(*hostRoot, "sys", "kernel", "debug")
	}
	log := zap.New(zap.UseFlagOptions(&zapOpts)).WithName("tune-balancing")
	ctrl.SetLogger(log)
	changes, err := tune.ApplyTuning(filepath.Join(*hostRoot, "proc"), *debugfsRoot, t)
	if err != nil {
		return fmt.Errorf("tune-balancing: %w", err)
	}
	for _, c := range changes {
		if c.Changed() {
			log.Info("Changed", "setting", c.Setting, "from", c.From, "to", c.To, "file", c.File)
		} else {
			log.Info("Unchanged", "setting", c.Setting, "value", c.To, "file", c.File)
		}
	}
	return nil
}

// optionalUint registers a flag whose value stays nil unless it is given. Any decimal that
// fits 64 bits is taken here; the range checks are tune.BalancingTuning.Validate's, so
// the message says what the kernel accepts.
func optionalUint(fs *flag.FlagSet, dst **uint64, name, usage string) {
	fs.Func(name, usage, func(s string) error {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return fmt.Errorf("%q is not a non-negative whole number", s)
		}
		*dst = &v
		return nil
	})
}

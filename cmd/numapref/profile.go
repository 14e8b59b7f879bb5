// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"errors"
	"fmt"
	"os"
	"runtime/pprof"
)

// startProfile starts a CPU profile into path.cpu, for measuring the agent (BENCHMARKS.md,
// "Idle cost"); the returned stop ends it and writes the allocations since start to
// path.allocs. An empty path profiles nothing.
func startProfile(path string) (stop func() error, err error) {
	if path == "" {
		return func() error { return nil }, nil
	}
	cpu, err := os.Create(path + ".cpu")
	if err != nil {
		return nil, fmt.Errorf("agent: creating the CPU profile: %w", err)
	}
	allocs, err := os.Create(path + ".allocs")
	if err != nil {
		return nil, errors.Join(fmt.Errorf("agent: creating the allocation profile: %w", err), cpu.Close())
	}
	if err := pprof.StartCPUProfile(cpu); err != nil {
		return nil, errors.Join(fmt.Errorf("agent: starting the CPU profile: %w", err), cpu.Close(), allocs.Close())
	}
	return func() error {
		pprof.StopCPUProfile()
		err := pprof.Lookup("allocs").WriteTo(allocs, 0)
		return errors.Join(err, cpu.Close(), allocs.Close())
	}, nil
}

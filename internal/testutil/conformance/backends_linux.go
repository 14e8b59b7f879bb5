// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build linux

package conformance

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/numapref/numapref/internal/numa/emulator"
	"github.com/numapref/numapref/internal/numa/prctl"
)

// selectBackend skips the test unless NUMAPREF_CONFORMANCE_IMPL (prctl or emulator; unset:
// both) selects backend, so that one binary can run the suite against each in turn. This
// is a selection, not a precondition, so it does not go through testenv.
func selectBackend(t *testing.T, backend string) {
	if impl := os.Getenv("NUMAPREF_CONFORMANCE_IMPL"); impl != "" && impl != backend {
		t.Skipf("NUMAPREF_CONFORMANCE_IMPL=%s selects another backend", impl)
	}
}

// PrctlOption is PR_PREFERRED_NID's number: NUMAPREF_PRCTL_OPTION, else
// prctl.DefaultOption.
func PrctlOption(t *testing.T) int {
	s := os.Getenv("NUMAPREF_PRCTL_OPTION")
	if s == "" {
		return prctl.DefaultOption
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatalf("NUMAPREF_PRCTL_OPTION=%q: %v", s, err)
	}
	return n
}

// OpenPrctl is the Run opener for the real kernel. Without a kernel that proves
// PR_PREFERRED_NID support it skips the test, saying what is missing; no prctl is issued.
//
// That skip selects the kernel, as selectBackend selects the backend: the prctl backend
// is tested on the kernel lab's patched kernel, and on every other kernel (the lab's
// control kernel, a developer's or CI's) the test must skip, not fail, so it does not go
// through testenv.
func OpenPrctl(t *testing.T) Target {
	selectBackend(t, "prctl")
	p, support := prctl.New(PrctlOption(t), "/proc")
	if !support.Supported {
		t.Skipf("SKIP (precondition not met): the running kernel does not prove PR_PREFERRED_NID support: %s. "+
			"The prctl backend needs a kernel with the PR_PREFERRED_NID patch, whose /proc/self/sched shows a "+
			"numa_preferred_nid_force line (CONFIG_NUMA_BALANCING and CONFIG_SCHED_DEBUG); "+
			"set NUMAPREF_PRCTL_OPTION if the patch uses an option other than %d.", support.Reason, prctl.DefaultOption)
	}
	return Target{Raw: p}
}

// OpenEmulator is the Run opener for the emulator, with its state in the shared directory
// and listening to fork events when it can (with clone flags from tracefs when it can).
func OpenEmulator(t *testing.T) Target {
	selectBackend(t, "emulator")
	return openEmulator(t, "")
}

// OpenEmulatorWithoutCloneTrace is OpenEmulator with the listener kept from tracefs, so
// that it falls back to kcmp and counts its guesses (backend "emulator-no-trace" for
// NUMAPREF_CONFORMANCE_IMPL).
func OpenEmulatorWithoutCloneTrace(t *testing.T) Target {
	selectBackend(t, "emulator-no-trace")
	// The shared directory is no tracefs: the listener does without.
	return openEmulator(t, SharedDir(t))
}

func openEmulator(t *testing.T, tracefsRoot string) Target {
	emu, err := emulator.New(emulator.Options{
		StateDir:    filepath.Join(SharedDir(t), "emulator"),
		ForkEvents:  true,
		SharedState: true,
		TracefsRoot: tracefsRoot,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { emu.Close() })
	stats := emu.Stats()
	return Target{
		Raw:             emu,
		AssumedFresh:    func() uint64 { return emu.Stats().AssumedFresh },
		TracksBirths:    stats.ListenerActive && (stats.KCMP || stats.CloneTrace),
		KnowsCloneFlags: stats.CloneTrace,
	}
}

// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build linux

package conformance_test

import (
	"os"
	"testing"

	"github.com/numapref/numapref/internal/testutil/conformance"
)

// The unit tier: the cases any user can run. conformance_host_test.go has the cases that
// need root.

// TestEmulator runs the suite against the emulator.
func TestEmulator(t *testing.T) { conformance.Run(t, conformance.OpenEmulator) }

// TestEmulatorWithoutCloneTrace runs it against the emulator without tracefs: CLONE_VM
// children are told from fork() children by kcmp alone, and a vfork child that exec'ed at
// once may be assumed fresh (counted). The kernel lab, which selects one backend a run,
// leaves it out.
func TestEmulatorWithoutCloneTrace(t *testing.T) {
	conformance.Run(t, conformance.OpenEmulatorWithoutCloneTrace)
}

// TestMain: on the kernel lab's control kernel, a kernel trace witnesses that the suite
// issued no PR_PREFERRED_NID prctl.
func TestMain(m *testing.M) { os.Exit(conformance.Main(m)) }

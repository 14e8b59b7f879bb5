// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build linux && kernellab

package smoke

import (
	"os"
	"testing"

	"github.com/numapref/numapref/internal/testutil/conformance"
)

// TestMain runs the tests; on the control kernel the conformance suite's prctl witness has
// the kernel record every prctl(78) issued meanwhile, by any task, and fails the binary if
// there was one.
func TestMain(m *testing.M) {
	os.Exit(conformance.RunWithPrctlWitness(m, prPreferredNID))
}

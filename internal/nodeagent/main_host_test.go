// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build host && linux

package nodeagent

import (
	"os"
	"testing"

	"github.com/numapref/numapref/internal/testutil/hostlab"
)

// TestMain lets the test binary run as the helper processes of the host tests: a lab
// workload (hostlab), the child engine of the crash test or the pid-reuse tests' helper
// in a PID namespace of its own. None returns.
func TestMain(m *testing.M) {
	hostlab.RunWorkloadIfAsked()
	runCrashHelperIfAsked()
	runPIDReuseHelperIfAsked()
	os.Exit(m.Run())
}

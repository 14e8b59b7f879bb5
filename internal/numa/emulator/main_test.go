// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package emulator

import (
	"os"
	"testing"
)

// The clone trace helper is a child process of TestEmulatorCloneTrace (host tier): this
// test binary started with cloneTraceHelperEnv=1 and cloneTraceHelperArg, which its
// parent looks for in /proc/<pid>/cmdline to know that it has exec'ed.
const (
	cloneTraceHelperEnv = "NUMAPREF_CLONETRACE_HELPER"
	cloneTraceHelperArg = "numapref-clonetrace-helper"
)

// TestMain runs the tests, or, in the clone trace helper, waits until stdin closes.
func TestMain(m *testing.M) {
	if os.Getenv(cloneTraceHelperEnv) == "1" {
		var b [1]byte
		_, _ = os.Stdin.Read(b[:])
		os.Exit(0)
	}
	os.Exit(m.Run())
}

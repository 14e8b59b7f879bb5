// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/numapref/numapref/internal/testutil/hostlab"
)

// The test binary doubles as the numapref binary (NUMAPREF_RUN_MAIN=1 runs main()) and as
// the host tier's lab workloads (hostlab).
func TestMain(m *testing.M) {
	hostlab.RunWorkloadIfAsked()
	if os.Getenv("NUMAPREF_RUN_MAIN") == "1" {
		os.Args = append([]string{"numapref"}, os.Args[1:]...)
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func TestUnknownCommandFails(t *testing.T) {
	cmd := exec.Command(os.Args[0], "frobnicate")
	cmd.Env = append(os.Environ(), "NUMAPREF_RUN_MAIN=1")
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), `unknown command "frobnicate"`) {
		t.Errorf("numapref frobnicate: err=%v out=%s", err, out)
	}
}

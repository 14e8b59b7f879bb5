// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build linux && host

package conformance_test

import (
	"testing"

	"github.com/numapref/numapref/internal/testutil/conformance"
)

// The host tier: the cases that start helpers as uid 1000 or as root without
// CAP_SYS_PTRACE, which needs root.

// TestEmulatorAsRoot is TestEmulator's root cases.
func TestEmulatorAsRoot(t *testing.T) { conformance.RunAsRoot(t, conformance.OpenEmulator) }

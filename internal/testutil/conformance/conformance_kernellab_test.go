// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build linux && host && kernellab

package conformance_test

import (
	"testing"

	"github.com/numapref/numapref/internal/testutil/conformance"
)

// The real kernel's tests, run by the kernel lab in both VMs (conformance.test -test.v,
// built with -tags host,kernellab): no other tier compiles them, since no other machine
// here has the patch. On the control kernel they skip: a selection of the kernel (see
// OpenPrctl), which the lab checks.

// TestPrctl runs the suite against the real kernel's PR_PREFERRED_NID.
func TestPrctl(t *testing.T) { conformance.Run(t, conformance.OpenPrctl) }

// TestPrctlAsRoot is TestPrctl's root cases.
func TestPrctlAsRoot(t *testing.T) { conformance.RunAsRoot(t, conformance.OpenPrctl) }

// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

// Package labenv tells kernel-lab test binaries which kernel the lab booted.
package labenv

import (
	"fmt"
	"os"
	"testing"

	"github.com/numapref/numapref/internal/testutil/testenv"
)

// Kernel returns which kernel hack/kernel/run.sh booted ("patched" or "control"). The
// kernel lab's in-VM tests carry the kernellab build tag, so no other tier compiles them;
// outside the lab VM (go test -tags kernellab by hand) the precondition is missing: a
// skip by hand, a failure under CI.
func Kernel(t testing.TB) string {
	t.Helper()
	switch k := os.Getenv("KERNELLAB_KERNEL"); k {
	case "patched", "control":
		return k
	case "":
		testenv.Require(t, false, "the kernel lab VM (KERNELLAB_KERNEL)", "make kernel-lab (hack/kernel/run.sh --kernel patched|control)")
	default:
		t.Fatalf("KERNELLAB_KERNEL=%q, want patched or control", k)
	}
	return ""
}

// RequireKernel needs the lab's want kernel ("patched" or "control"). The lab runs each
// test only in the boot of its kernel (hack/kernel/lab.sh chooses them with -test.run
// and -test.skip), so there it holds; run in the other boot, the test says which one it
// needs: a skip by hand, a failure under CI (run.sh passes CI=true into the VM).
func RequireKernel(t testing.TB, want string) {
	t.Helper()
	k := Kernel(t)
	testenv.Require(t, k == want, fmt.Sprintf("the kernel lab's %s kernel (this boot is the %s one)", want, k),
		fmt.Sprintf("make kernel-lab (it runs this test in the %s boot)", want))
}

// Package labenv tells kernel-lab test binaries which kernel the lab booted.
package labenv

import (
	"os"
	"testing"

	"github.com/numapref/numapref/internal/testutil/testenv"
)

// Kernel returns which kernel hack/kernel/run.sh booted ("patched" or "control"). The
// kernel lab's in-VM tests carry the kernellab build tag, so no other tier compiles them;
// outside the lab VM (go test -tags kernellab by hand) the precondition is missing: a
// skip by hand, a failure under CI. A test of one kernel skipping on the other is a
// selection, not a missing precondition: the lab boots both.
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

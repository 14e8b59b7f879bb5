// Package labenv tells kernel-lab test binaries which kernel the lab booted.
package labenv

import (
	"os"
	"testing"
)

// Kernel returns which kernel hack/kernel/run.sh booted ("patched" or "control"). Outside
// the lab VM it skips the test, naming how to run it; the kernel lab (make kernel-lab, part
// of make test) runs it there.
func Kernel(t testing.TB) string {
	t.Helper()
	switch k := os.Getenv("KERNELLAB_KERNEL"); k {
	case "patched", "control":
		return k
	case "":
		t.Skip("runs inside the kernel lab VM: make kernel-lab (hack/kernel/run.sh --kernel patched|control)")
	default:
		t.Fatalf("KERNELLAB_KERNEL=%q, want patched or control", k)
	}
	return ""
}

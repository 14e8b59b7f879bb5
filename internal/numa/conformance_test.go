//go:build linux

package numa_test

import (
	"testing"

	"github.com/numapref/numapref/internal/numa/conformance"
)

// TestConformanceEmulator runs the conformance suite against the emulator, here.
func TestConformanceEmulator(t *testing.T) { conformance.Run(t, conformance.OpenEmulator) }

// TestConformancePrctl runs the conformance suite against the kernel. It is skipped, with
// the precondition printed, unless the kernel proves PR_PREFERRED_NID support (the kernel
// lab's patched kernel does).
func TestConformancePrctl(t *testing.T) { conformance.Run(t, conformance.OpenPrctl) }

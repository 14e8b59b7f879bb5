//go:build host && linux

package nodeagent

import (
	"os"
	"testing"

	"github.com/numapref/numapref/internal/testutil/hostlab"
)

// TestMain lets the test binary run as the helper processes of the host tests: a lab
// workload (hostlab) or the child engine of the crash test. Neither returns.
func TestMain(m *testing.M) {
	hostlab.RunWorkloadIfAsked()
	runCrashHelperIfAsked()
	os.Exit(m.Run())
}

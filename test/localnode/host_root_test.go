//go:build host

package localnode

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/numapref/numapref/internal/testutil/testenv"
)

// The snapshot of this real host, and a leftover it must notice: a directory named by
// the node appears after the snapshot.
func TestSnapshotAndLeftoversOnThisHost(t *testing.T) {
	testenv.RequireRoot(t) // iptables and the host's mounts
	s, err := snapshotHost()
	if err != nil {
		t.Fatal(err)
	}
	if s.Sysctls["kernel/panic"] == "" || len(s.Links) == 0 {
		t.Fatalf("snapshot misses the host's sysctls or links: %+v", s)
	}
	dir := filepath.Join(t.TempDir(), "node")
	if left := s.Leftovers(dir, nil); len(left) != 0 {
		t.Fatalf("leftovers right after the snapshot: %v", left)
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	left := s.Leftovers(dir, nil)
	if len(left) != 1 || left[0] != "directory "+dir {
		t.Fatalf("leftovers = %v, want the node directory", left)
	}
}

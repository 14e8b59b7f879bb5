package localnode

import (
	"os"
	"path/filepath"
	"testing"
)

func TestUnescapeMount(t *testing.T) {
	for in, want := range map[string]string{
		`/run/netns/cni-1`:       "/run/netns/cni-1",
		`/var/tmp/a\040b`:        "/var/tmp/a b",
		`/x\134y`:                `/x\y`,
		`/bad\08`:                `/bad\08`,
		`/short\04`:              `/short\04`,
		`/tab\011and\012newline`: "/tab\tand\nnewline",
	} {
		if got := unescapeMount(in); got != want {
			t.Errorf("unescapeMount(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestUnder(t *testing.T) {
	prefixes := []string{"/run/containerd", "/var/tmp/node"}
	for path, want := range map[string]bool{
		"/run/containerd":           true,
		"/run/containerd/s/abc":     true,
		"/run/containerd-other":     false,
		"/var/tmp/node/kubelet/pod": true,
		"/var/tmp":                  false,
	} {
		if got := under(path, prefixes); got != want {
			t.Errorf("under(%q) = %t, want %t", path, got, want)
		}
	}
}

// The snapshot of this real host, and a leftover it must notice: a directory named by
// the node appears after the snapshot.
func TestSnapshotAndLeftoversOnThisHost(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to read iptables")
	}
	s, err := snapshotHost()
	if err != nil {
		t.Fatal(err)
	}
	if s.Sysctls["kernel/panic"] == "" || len(s.Links) == 0 {
		t.Fatalf("snapshot misses the host's sysctls or links: %+v", s)
	}
	dir := filepath.Join(t.TempDir(), "node")
	if left := s.leftovers(dir, nil); len(left) != 0 {
		t.Fatalf("leftovers right after the snapshot: %v", left)
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	left := s.leftovers(dir, nil)
	if len(left) != 1 || left[0] != "directory "+dir {
		t.Fatalf("leftovers = %v, want the node directory", left)
	}
}

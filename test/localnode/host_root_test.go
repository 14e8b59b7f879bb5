// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build host

package localnode

import (
	"os"
	"os/exec"
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

// A node whose record outlived its daemons (the run that started it was killed) is torn
// down from its record before a new one starts; a node with a live daemon is left alone.
func TestReclaimOrphanOnlyWithoutLiveDaemons(t *testing.T) {
	testenv.RequireRoot(t) // the snapshot reads iptables; the teardown puts the host back
	before, err := snapshotHost()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "node")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	// A daemon of the node: a shell under etcd's name with dir on its command line.
	etcd := filepath.Join(t.TempDir(), "etcd")
	sh, err := os.ReadFile("/bin/sh")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(etcd, sh, 0o755); err != nil {
		t.Fatal(err)
	}
	daemon := exec.Command(etcd, "-c", "sleep 600; :", dir)
	if err := daemon.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = daemon.Process.Kill(); _ = daemon.Wait() })
	n := &Node{Dir: dir, Pids: map[string]int{"etcd": daemon.Process.Pid}, Before: before}
	if err := n.save(); err != nil {
		t.Fatal(err)
	}
	logf := func(f string, a ...any) { t.Logf(f, a...) }

	if reclaimed, err := ReclaimOrphan(dir, logf); err != nil || reclaimed {
		t.Fatalf("ReclaimOrphan with a live daemon = %v, %v; want false, nil", reclaimed, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "node.json")); err != nil {
		t.Fatalf("the record of a live node was touched: %v", err)
	}

	_ = daemon.Process.Kill()
	_ = daemon.Wait()
	if reclaimed, err := ReclaimOrphan(dir, logf); err != nil || !reclaimed {
		t.Fatalf("ReclaimOrphan of an orphan = %v, %v; want true, nil", reclaimed, err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("the orphan's directory is still there: %v", err)
	}
	if reclaimed, err := ReclaimOrphan(dir, logf); err != nil || reclaimed {
		t.Fatalf("ReclaimOrphan with no record = %v, %v; want false, nil", reclaimed, err)
	}
}

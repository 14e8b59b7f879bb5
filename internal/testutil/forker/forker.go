// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

// Package forker is a process that forks on demand, for tests of fork events: a shell,
// outside every lab container, that forks /bin/true each time it is asked.
package forker

import (
	"bufio"
	"io"
	"os/exec"
	"testing"
)

// Forker is a running shell that forks /bin/true on each Fork.
type Forker struct {
	// PID is the shell's.
	PID  int
	in   io.Writer
	done *bufio.Reader
}

// Start starts a Forker; it is killed when the test ends.
func Start(t testing.TB) *Forker {
	t.Helper()
	cmd := exec.Command("/bin/sh", "-c", "while read x; do /bin/true; echo done; done")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return &Forker{PID: cmd.Process.Pid, in: in, done: bufio.NewReader(out)}
}

// Fork has the shell fork once, and returns when its child has exited.
func (f *Forker) Fork(t testing.TB) {
	t.Helper()
	if _, err := io.WriteString(f.in, "go\n"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.done.ReadString('\n'); err != nil {
		t.Fatalf("the forker: %v", err)
	}
}

// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build host && linux

package migration

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/numapref/numapref/internal/numa"
	"github.com/numapref/numapref/internal/numa/migrate"
)

// helperEnv makes the test binary a process that touches the MiB it names, says so on its
// stdout and waits for its stdin to close.
const helperEnv = "NUMAPREF_MIGRATION_HELPER_MIB"

func TestMain(m *testing.M) {
	if mib := os.Getenv(helperEnv); mib != "" {
		n, _ := strconv.Atoi(mib)
		mem, err := unix.Mmap(-1, 0, n<<20, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
		if err != nil {
			os.Exit(3)
		}
		for i := 0; i < len(mem); i += os.Getpagesize() {
			mem[i] = 1
		}
		os.Stdout.WriteString("ready\n")
		_, _ = io.Copy(io.Discard, os.Stdin)
		runtime.KeepAlive(mem)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func startHelper(t *testing.T, mib int) int {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"="+strconv.Itoa(mib))
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stdin.Close(); _ = cmd.Wait() })
	if _, err := bufio.NewReader(stdout).ReadString('\n'); err != nil {
		t.Fatalf("the helper: %v", err)
	}
	return cmd.Process.Pid
}

// The worker drives the real move_pages over a child's whole address space. This machine
// has one node, so nothing lies on another to move: the request ends Moved having looked at
// every touched page. A home outside the child's cpuset.mems is refused before any move.
func TestWorkerWithTheKernelsMovePages(t *testing.T) {
	pid := startHelper(t, 16)
	w, err := New(&migrate.Mover{}, Options{Rate: 1e6, Step: 1024}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	w.Start()
	defer w.Stop()
	w.Submit(Request{Key: "home", PIDs: []int{pid}, Home: 0, From: numa.NewNodeMask(1)})
	w.Submit(Request{Key: "pinned", PIDs: []int{pid}, Home: 1000, From: numa.NewNodeMask(0)})
	endsWith(t, w, "home", ReasonMoved)
	endsWith(t, w, "pinned", ReasonPinned)
	st, _ := w.Status("home")
	if touched := 16 << 20 / os.Getpagesize(); st.Scanned < touched || st.Moved != 0 || st.Failed != 0 {
		t.Errorf("status = %+v; want at least the %d touched pages looked at, none moved or failed", st, touched)
	}
	w.Submit(Request{Key: "gone", PIDs: []int{1 << 30}, Home: 0, From: numa.NewNodeMask(1)}) // above any pid_max
	endsWith(t, w, "gone", ReasonGone)
}

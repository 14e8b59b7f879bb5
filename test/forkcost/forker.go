// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build linux

package main

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/numapref/numapref/internal/testutil/hostlab"
)

// forkerEnv makes this binary the storm's forker: "<rate>:<duration>:<exec 0|1>".
const forkerEnv = "NUMAPREF_FORKCOST_FORKER"

// storm runs the forker process at rate forks per second for d, with during (if not nil)
// run beside it, and returns how many forks it made.
func storm(rate int, d time.Duration, execChildren bool, during func()) (int, error) {
	self, err := os.Executable()
	if err != nil {
		return 0, err
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%d:%s:%t", forkerEnv, rate, d, execChildren))
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return 0, err
	}
	if err := hostlab.StartOnSpawnerThread(cmd); err != nil {
		return 0, fmt.Errorf("starting the forker: %w", err)
	}
	done := make(chan struct{})
	if during != nil {
		go func() { during(); close(done) }()
	} else {
		close(done)
	}
	line, readErr := bufio.NewReader(out).ReadString('\n')
	waitErr := cmd.Wait()
	<-done
	if waitErr != nil {
		return 0, fmt.Errorf("forker: %w", waitErr)
	}
	var forks int
	if _, err := fmt.Sscanf(line, "forks %d", &forks); err != nil || readErr != nil {
		return 0, fmt.Errorf("forker answered %q: %v %v", line, err, readErr)
	}
	return forks, nil
}

// runForker forks at the rate of spec for its duration, reaps the children and prints
// "forks N". Its children exit at once, or exec /bin/true.
func runForker(spec string) int {
	parts := strings.Split(spec, ":")
	if len(parts) != 3 {
		fmt.Fprintf(os.Stderr, "forker: bad spec %q\n", spec)
		return 2
	}
	rate, err1 := strconv.Atoi(parts[0])
	d, err2 := time.ParseDuration(parts[1])
	execChildren, err3 := strconv.ParseBool(parts[2])
	if err1 != nil || err2 != nil || err3 != nil {
		fmt.Fprintf(os.Stderr, "forker: bad spec %q\n", spec)
		return 2
	}
	forks := 0
	began := time.Now()
	for elapsed := time.Duration(0); elapsed < d; elapsed = time.Since(began) {
		// A forker that falls behind forks flat out, but never past d.
		for due := int(elapsed.Seconds() * float64(rate)); forks < due && time.Since(began) < d; forks++ {
			if err := forkOne(execChildren); err != nil {
				fmt.Fprintln(os.Stderr, "forker:", err)
				return 1
			}
		}
		reap()
		time.Sleep(200 * time.Microsecond)
	}
	for reap() > 0 || hasChildren() {
		time.Sleep(time.Millisecond)
	}
	fmt.Printf("forks %d\n", forks)
	return 0
}

func forkOne(execChildren bool) error {
	if execChildren {
		_, err := syscall.ForkExec("/bin/true", []string{"true"}, &syscall.ProcAttr{})
		return err
	}
	// Go forks with clone(CLONE_VM|CLONE_VFORK), which copies no page tables (a plain
	// fork() of this process costs milliseconds in this VM): a path that does not exist
	// makes the child exit at once, and ForkExec reaps it.
	_, err := syscall.ForkExec(noSuchProgram, []string{"none"}, &syscall.ProcAttr{})
	if errors.Is(err, syscall.ENOENT) {
		return nil
	}
	return fmt.Errorf("fork: %w", err)
}

const noSuchProgram = "/nonexistent/forkcost-child"

// reap collects the children that exited and returns how many.
func reap() int {
	n := 0
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return n
		}
		n++
	}
}

func hasChildren() bool {
	var ws syscall.WaitStatus
	_, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
	return err != syscall.ECHILD
}

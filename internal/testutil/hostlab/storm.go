// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package hostlab

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// stormEnv makes this binary a storm's forker, "<rate>:<duration>:<exec true|false>"; every
// binary that starts storms calls RunWorkloadIfAsked first thing, as for workloads.
const stormEnv = "NUMAPREF_HOSTLAB_STORM"

// Storm is a process in no lab container that forks at a fixed rate: a host's unrelated
// fork storm.
type Storm struct {
	cmd *exec.Cmd
	out io.ReadCloser
}

// StartStorm starts a process that forks rate times a second for d. Its children exit at
// once (fork and exit events), or with execChildren exec /bin/true first (as a shell loop).
func StartStorm(rate int, d time.Duration, execChildren bool) (*Storm, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%d:%s:%t", stormEnv, rate, d, execChildren))
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := StartOnSpawnerThread(cmd); err != nil {
		return nil, fmt.Errorf("starting the storm: %w", err)
	}
	return &Storm{cmd: cmd, out: out}, nil
}

// Wait waits for the storm's end and returns how many forks it made.
func (s *Storm) Wait() (int, error) {
	line, readErr := bufio.NewReader(s.out).ReadString('\n')
	if err := s.cmd.Wait(); err != nil {
		return 0, fmt.Errorf("storm: %w", err)
	}
	var forks int
	if _, err := fmt.Sscanf(line, "forks %d", &forks); err != nil || readErr != nil {
		return 0, fmt.Errorf("storm answered %q: %v %v", line, err, readErr)
	}
	return forks, nil
}

// Stop ends the storm before its time.
func (s *Storm) Stop() {
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
}

// runStormIfAsked forks as stormEnv's spec says and exits, when it is set.
func runStormIfAsked() {
	if spec := os.Getenv(stormEnv); spec != "" {
		os.Exit(runStorm(spec))
	}
}

// runStorm forks at the rate of spec for its duration, reaps the children and prints
// "forks N".
func runStorm(spec string) int {
	parts := strings.Split(spec, ":")
	if len(parts) != 3 {
		fmt.Fprintf(os.Stderr, "storm: bad spec %q\n", spec)
		return 2
	}
	rate, err1 := strconv.Atoi(parts[0])
	d, err2 := time.ParseDuration(parts[1])
	execChildren, err3 := strconv.ParseBool(parts[2])
	if err1 != nil || err2 != nil || err3 != nil {
		fmt.Fprintf(os.Stderr, "storm: bad spec %q\n", spec)
		return 2
	}
	forks := 0
	began := time.Now()
	for elapsed := time.Duration(0); elapsed < d; elapsed = time.Since(began) {
		// A storm that falls behind forks flat out, but never past d.
		for due := int(elapsed.Seconds() * float64(rate)); forks < due && time.Since(began) < d; forks++ {
			if err := forkOne(execChildren); err != nil {
				fmt.Fprintln(os.Stderr, "storm:", err)
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

const noSuchProgram = "/nonexistent/hostlab-storm-child"

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

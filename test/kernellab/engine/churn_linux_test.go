// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build linux && kernellab

package engine

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/numapref/numapref/internal/testutil/hostlab"
)

// A churner is this test binary re-executed (churnerEnv=1) in a container's cgroup: on a
// "go" line it fork()s short-lived children, a few at a time, reaps them, and prints one
// JSON line (churnResult) with every child's pid and exit status. Each child is a raw
// clone(SIGCHLD) (no Go code runs in it, as in internal/testutil/rawfork): it reads its own
// PR_PREFERRED_NID (GET on pid 0) churnRounds times, sleeping in between, and exits with a
// bit set for every value it saw, so the churner learns which nodes each child held while
// it lived, however short its life.
const churnerEnv = "NUMAPREF_LAB_CHURNER"

// Exit status bits of a churn child.
const (
	sawNone  = 1 << 0 // GET -1
	sawNode0 = 1 << 1
	sawNode1 = 1 << 2
	sawOther = 1 << 3 // another value, or the GET failed
)

// churnSpec is what a child does; it lives on the churner's heap and is copied into each
// child with the rest of its memory.
type churnSpec struct {
	sleep  unix.Timespec
	val    int32
	rounds int
	prctl  bool
	option uintptr
}

// churnFork forks one child that runs spec. Like internal/testutil/rawfork it is nosplit: the child
// of a multi-threaded Go process may run nothing but raw system calls.
//
//go:nosplit
//go:norace
func churnFork(spec *churnSpec) (int, syscall.Errno) {
	pid, _, errno := syscall.RawSyscall6(syscall.SYS_CLONE, uintptr(syscall.SIGCHLD), 0, 0, 0, 0, 0)
	if errno != 0 {
		return 0, errno
	}
	if pid != 0 {
		return int(pid), 0
	}
	_, _, _ = syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_SET_PDEATHSIG, uintptr(syscall.SIGKILL), 0)
	seen := uintptr(0)
	for i := 0; i < spec.rounds; i++ {
		if spec.prctl {
			spec.val = -7
			_, _, e := syscall.RawSyscall6(syscall.SYS_PRCTL, spec.option, 0, 0, 0, uintptr(unsafe.Pointer(&spec.val)), 0)
			switch {
			case e != 0:
				seen |= sawOther
			case spec.val == -1:
				seen |= sawNone
			case spec.val == 0:
				seen |= sawNode0
			case spec.val == 1:
				seen |= sawNode1
			default:
				seen |= sawOther
			}
		}
		_, _, _ = syscall.RawSyscall(syscall.SYS_NANOSLEEP, uintptr(unsafe.Pointer(&spec.sleep)), 0, 0)
	}
	for {
		_, _, _ = syscall.RawSyscall(syscall.SYS_EXIT_GROUP, seen, 0, 0)
	}
}

// churnOrder is the "go" line: how many children, how many at a time, and what each does.
type churnOrder struct {
	Children int           `json:"children"`
	Parallel int           `json:"parallel"`
	Rounds   int           `json:"rounds"`
	Sleep    time.Duration `json:"sleep"`
	Prctl    bool          `json:"prctl"`
	Option   int           `json:"option"`
	// For bounds the churn: no child is started after it (a loaded host's TCG is slow).
	For time.Duration `json:"for"`
}

// churnResult is the churner's answer: child i had pid Pids[i] and exit status Codes[i]
// (-1: killed by a signal). ForkRetries counts fork()s refused for want of a free pid.
type churnResult struct {
	Pids        []int  `json:"pids"`
	Codes       []int  `json:"codes"`
	ForkRetries int    `json:"forkRetries"`
	Error       string `json:"error,omitempty"`
}

func runChurnerIfAsked() {
	if os.Getenv(churnerEnv) != "1" {
		return
	}
	line, err := bufio.NewReader(os.Stdin).ReadString('\n')
	if err != nil {
		os.Exit(2)
	}
	var o churnOrder
	res := churnResult{}
	if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "go ")), &o); err != nil {
		res.Error = err.Error()
	} else {
		res = churn(o)
	}
	out, _ := json.Marshal(res)
	fmt.Println(string(out))
	os.Exit(0)
}

func churn(o churnOrder) churnResult {
	// The children's parent-death signal follows the forking thread: stay on it.
	runtime.LockOSThread()
	spec := &churnSpec{sleep: unix.NsecToTimespec(o.Sleep.Nanoseconds()), rounds: o.Rounds, prctl: o.Prctl, option: uintptr(o.Option)}
	var res churnResult
	stopAt := time.Now().Add(o.For)
	index := map[int]int{} // live child pid → its index in res
	reap := func() error {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, 0, nil)
		if err == syscall.EINTR {
			return nil
		}
		if err != nil {
			return err
		}
		i, ok := index[pid]
		if !ok {
			return nil
		}
		delete(index, pid)
		if ws.Exited() {
			res.Codes[i] = ws.ExitStatus()
		}
		return nil
	}
	for started := 0; started < o.Children || len(index) > 0; {
		if o.For > 0 && started < o.Children && time.Now().After(stopAt) {
			o.Children = started
		}
		for len(index) < o.Parallel && started < o.Children {
			pid, errno := churnFork(spec)
			if errno == syscall.EAGAIN && len(index) > 0 {
				res.ForkRetries++ // no free pid: reap one first
				break
			}
			if errno != 0 {
				res.Error = fmt.Sprintf("fork %d: %v", started, errno)
				o.Children = started
				break
			}
			index[pid] = len(res.Pids)
			res.Pids = append(res.Pids, pid)
			res.Codes = append(res.Codes, -1)
			started++
		}
		if len(index) == 0 {
			continue
		}
		if err := reap(); err != nil {
			res.Error = fmt.Sprintf("wait: %v", err)
			break
		}
	}
	return res
}

// churner is a churner process, started by the test.
type churner struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Reader
}

func startChurner() (*churner, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), churnerEnv+"=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := hostlab.StartOnSpawnerThread(cmd); err != nil {
		return nil, fmt.Errorf("starting a churner: %w", err)
	}
	return &churner{cmd: cmd, in: in, out: bufio.NewReader(out)}, nil
}

func (c *churner) pid() int { return c.cmd.Process.Pid }

func (c *churner) start(o churnOrder) error {
	data, err := json.Marshal(o)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(c.in, "go %s\n", data)
	return err
}

func (c *churner) result() (churnResult, error) {
	var res churnResult
	line, err := c.out.ReadString('\n')
	if err != nil {
		return res, fmt.Errorf("reading the churner's result: %w", err)
	}
	if err := json.Unmarshal([]byte(line), &res); err != nil {
		return res, fmt.Errorf("churner result %q: %w", line, err)
	}
	if res.Error != "" {
		return res, errors.New("churner: " + res.Error)
	}
	return res, nil
}

func (c *churner) stop() {
	c.in.Close()
	c.cmd.Process.Kill()
	c.cmd.Wait()
}

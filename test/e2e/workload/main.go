// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

// Command workload is the e2e tests' container image: one static binary, two roles.
//
//	workload pause              the pod sandbox's pause process: sleeps, reaps children,
//	                            exits on SIGTERM or SIGINT
//	workload work -threads N    a multi-threaded workload: N extra OS threads, each idle;
//	                            SIGUSR1 forks a child with fork() (no CLONE_VM: the kernel
//	                            resets its preferred node), SIGUSR2 starts a child with Go's
//	                            os/exec (CLONE_VM|CLONE_VFORK then exec: it inherits the
//	                            value); children live until the workload exits
//	workload sleep              what the SIGUSR2 child runs
//	workload first-node [-emulator DIR] [-threads N] [-await]
//	                            its first action reports its own forced preferred node,
//	                            "first-node N" on stdout (-1: none), then it works as work
//	                            does: with -emulator, from the view of the emulator whose
//	                            state directory is DIR (the agent's, mounted read-only; the
//	                            pod needs hostPID, as the view is by host pid), else with a
//	                            prctl GET on a kernel that proves the patch
//	                            ("first-node unsupported" otherwise);
//	                            its second line is its own memory policy, as numa_maps
//	                            spells it: "first-policy prefer:0" ("default" for none);
//	                            -await then polls (every 5 ms) until it has a node and prints
//	                            "placed-after-ms X" (0 when it had one at its first report)
//
// The tests drive it with signals from the host, so they need neither exec nor a shell in
// the image.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strconv"
	"syscall"
	"time"

	"github.com/numapref/numapref/internal/numa"
	"github.com/numapref/numapref/internal/numa/emulator"
	"github.com/numapref/numapref/internal/numa/mempolicy"
	"github.com/numapref/numapref/internal/numa/prctl"
	"github.com/numapref/numapref/internal/testutil/rawfork"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: workload pause | work [-threads N] | first-node [-emulator DIR] [-threads N] [-await] | sleep")
		os.Exit(2)
	}
	switch os.Args[1] {
	case "pause":
		pause()
	case "work":
		fs := flag.NewFlagSet("work", flag.ExitOnError)
		threads := fs.Int("threads", 8, "extra OS threads to start")
		_ = fs.Parse(os.Args[2:]) // ExitOnError: a bad flag exits
		work(*threads)
	case "first-node":
		fs := flag.NewFlagSet("first-node", flag.ExitOnError)
		emulatorDir := fs.String("emulator", "", "the emulator's state directory, whose view to read (mounted read-only)")
		threads := fs.Int("threads", 2, "extra OS threads to start after the report")
		await := fs.Bool("await", false, "then poll (every 5 ms, up to 60 s) until the main thread has a node, and print placed-after-ms")
		_ = fs.Parse(os.Args[2:]) // ExitOnError: a bad flag exits
		started := time.Now()
		first := ownNode(*emulatorDir)
		fmt.Println("first-node", first)
		fmt.Println("first-policy", ownPolicy())
		if *await {
			awaitNode(*emulatorDir, first, started)
		}
		work(*threads)
	case "sleep":
		for { // not select{}: with no other goroutine the runtime calls that a deadlock
			time.Sleep(time.Hour)
		}
	default:
		fmt.Fprintf(os.Stderr, "unknown role %q\n", os.Args[1])
		os.Exit(2)
	}
}

func pause() {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	for s := range sig {
		if s != syscall.SIGCHLD {
			os.Exit(0)
		}
		reap()
	}
}

// reap collects every exited child, so none stays a zombie (the sandbox is its pid 1).
func reap() {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return
		}
	}
}

func work(threads int) {
	for range threads {
		go func() {
			runtime.LockOSThread() // never unlocked: the thread stays for this goroutine
			select {}
		}()
	}
	fmt.Printf("workload: pid %d with %d extra threads\n", os.Getpid(), threads)
	sig := make(chan os.Signal, 4)
	signal.Notify(sig, syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	// Raw fork children get SIGKILL when the forking thread dies: fork from one thread
	// that lives as long as the workload.
	runtime.LockOSThread()
	var execChildren []*exec.Cmd
	for s := range sig {
		switch s {
		case syscall.SIGUSR1:
			pid, errno := rawfork.Fork()
			if errno != 0 {
				fmt.Fprintln(os.Stderr, "workload: fork:", errno)
				continue
			}
			fmt.Printf("workload: forked %d\n", pid)
		case syscall.SIGUSR2:
			c := exec.Command("/proc/self/exe", "sleep")
			c.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
			if err := c.Start(); err != nil {
				fmt.Fprintln(os.Stderr, "workload: exec:", err)
				continue
			}
			execChildren = append(execChildren, c)
			fmt.Printf("workload: started %d\n", c.Process.Pid)
		case syscall.SIGCHLD:
			reap()
		default:
			for _, c := range execChildren {
				c.Process.Kill()
			}
			os.Exit(0)
		}
	}
}

// ownPolicy is the memory policy of the calling thread, which every thread of the process
// inherited from the task runc exec'ed into this program.
func ownPolicy() string {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	p, err := mempolicy.Get()
	if err != nil {
		return "error: " + err.Error()
	}
	return p.String()
}

// ownNode is the forced preferred node of the process's main thread, the task runc
// exec'ed into this program, as a string: from the view of the emulator whose state
// directory is emulatorDir when it is set, else from the kernel. The Go runtime's own
// threads inherit the main thread's value.
func ownNode(emulatorDir string) string {
	tid := os.Getpid()
	v, err := 0, error(nil)
	if emulatorDir == "" {
		p, support := prctl.New(prctl.DefaultOption, "/proc")
		if !support.Supported {
			return "unsupported"
		}
		v, err = p.Get(tid)
	} else {
		var task numa.Task
		if task, err = numa.ReadTask("/proc", tid); err == nil {
			v, err = emulator.ViewedForce(emulatorDir, tid, task)
		}
	}
	if err != nil {
		return "error: " + err.Error()
	}
	return strconv.Itoa(v)
}

// awaitNode polls until the main thread has a node (first is the first report's), and
// prints how long after started that was: "placed-after-ms X", or "placed-after-ms never"
// after 60 s.
func awaitNode(emulatorDir, first string, started time.Time) {
	at := time.Duration(0)
	for v := first; v == "-1"; {
		if time.Since(started) > time.Minute {
			fmt.Println("placed-after-ms never")
			return
		}
		time.Sleep(5 * time.Millisecond)
		v = ownNode(emulatorDir)
		at = time.Since(started)
	}
	fmt.Printf("placed-after-ms %.1f\n", float64(at)/float64(time.Millisecond))
}

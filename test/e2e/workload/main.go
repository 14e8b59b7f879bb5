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
	"syscall"
	"time"

	"github.com/numapref/numapref/internal/testutil/rawfork"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: workload pause | work [-threads N] | sleep")
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

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
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/numapref/numapref/internal/numa"
	"github.com/numapref/numapref/internal/numa/mempolicy"
	"github.com/numapref/numapref/internal/testutil/rawfork"
)

// The workload is this same binary, re-executed with workloadEnv set: every binary that
// starts workloads calls RunWorkloadIfAsked first thing (tests in TestMain).
const workloadEnv = "NUMAPREF_HOSTLAB_WORKLOAD"

// RunWorkloadIfAsked turns this process into a workload, or a storm (StartStorm), when it
// was started as one, and never returns then. A workload reads commands on stdin and answers on stdout:
//
//	threads N   start N more OS threads (each locked and idle); answers "ok"
//	fork        start `sh -c 'sleep 600 & echo $!; wait'`: sh is a CLONE_VM child (Go's
//	            exec), sleep a real fork() child of sh; answers "pids <sh> <sleep>"
//	rawfork     fork() this process with a raw clone(SIGCHLD) (no exec, no shell: the
//	            kernel lab's initramfs has no /bin/sh); the child only pauses until killed
//	            (or until the workload's forking thread dies); answers "pid <child>"
//	alloc N     touch N MiB of anonymous memory and keep it; answers "ok"
//	stream M T C  map M MiB of anonymous memory and start T locked threads, each with its
//	            own slice; each touches its slice first while pinned to the CPUs of list
//	            C ("0" or "0-3": where the memory lands, by first touch), then, once all
//	            are done, drops the pin (any CPU) and streams over its slice until exit,
//	            reading a byte of every cache line; answers "tids <tid> ..." once touched
//	exit        exit
func RunWorkloadIfAsked() {
	runStormIfAsked()
	if os.Getenv(workloadEnv) != "1" {
		return
	}
	runWorkload(os.Stdin, os.Stdout)
	os.Exit(0)
}

func runWorkload(in io.Reader, out io.Writer) { //nolint:funlen // test tooling: the workload's command loop, one case per command of its protocol
	var children []*exec.Cmd
	var rawChildren []int
	defer func() {
		for _, c := range children {
			c.Process.Kill()
			c.Wait()
		}
		for _, pid := range rawChildren {
			syscall.Kill(pid, syscall.SIGKILL)
			var ws syscall.WaitStatus
			syscall.Wait4(pid, &ws, 0, nil)
		}
	}()
	block := make(chan struct{})
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		cmd, arg, _ := strings.Cut(sc.Text(), " ")
		switch cmd {
		case "threads":
			n, _ := strconv.Atoi(arg)
			var started sync.WaitGroup
			for range n {
				started.Add(1)
				go func() {
					runtime.LockOSThread() // never unlocked: the thread stays for this goroutine
					started.Done()
					<-block
				}()
			}
			started.Wait()
			fmt.Fprintln(out, "ok")
		case "fork":
			c := exec.Command("/bin/sh", "-c", "sleep 600 & echo $!; wait")
			c.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
			stdout, err := c.StdoutPipe()
			if err == nil {
				err = c.Start()
			}
			if err != nil {
				fmt.Fprintln(out, "error", err)
				continue
			}
			children = append(children, c)
			line, err := bufio.NewReader(stdout).ReadString('\n')
			if err != nil {
				fmt.Fprintln(out, "error", err)
				continue
			}
			fmt.Fprintf(out, "pids %d %s\n", c.Process.Pid, strings.TrimSpace(line))
		case "rawfork":
			// The child's parent-death signal follows the forking thread: keep this
			// goroutine on it for good, so the child lives as long as the workload.
			runtime.LockOSThread()
			pid, errno := rawfork.Fork()
			if errno != 0 {
				fmt.Fprintln(out, "error fork:", errno)
				continue
			}
			rawChildren = append(rawChildren, pid)
			fmt.Fprintf(out, "pid %d\n", pid)
		case "alloc":
			// Touch MiB of anonymous memory and keep it: the pages land on the nodes the
			// container's cpuset.mems allows. The mapping is never unmapped (and is not the
			// garbage collector's), so it is held until the process exits.
			n, _ := strconv.Atoi(arg)
			mem, err := syscall.Mmap(-1, 0, n<<20, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
			if err != nil {
				fmt.Fprintln(out, "error", err)
				continue
			}
			for i := 0; i < len(mem); i += 4096 {
				mem[i] = 1
			}
			fmt.Fprintln(out, "ok")
		case "stream":
			tids, err := stream(arg)
			if err != nil {
				fmt.Fprintln(out, "error stream:", err)
				continue
			}
			fmt.Fprintln(out, "tids", strings.Trim(fmt.Sprint(tids), "[]"))
		case "exit":
			return
		}
	}
}

// streamSink keeps the streaming reads from being optimized away.
var streamSink atomic.Uint64

// stream starts the streaming threads of the "stream MIB THREADS CPUS" command and returns
// their thread ids once every slice is touched.
func stream(arg string) ([]int, error) {
	var mib, threads int
	var cpuList string
	if _, err := fmt.Sscanf(arg, "%d %d %s", &mib, &threads, &cpuList); err != nil || mib <= 0 || threads <= 0 {
		return nil, fmt.Errorf("want \"stream MIB THREADS CPUS\", got %q", arg)
	}
	cpus, err := numa.ParseList(cpuList)
	if err != nil {
		return nil, err
	}
	var pinned, all unix.CPUSet
	for _, c := range cpus {
		pinned.Set(c)
	}
	if err := unix.SchedGetaffinity(0, &all); err != nil {
		return nil, err
	}
	mem, err := unix.Mmap(-1, 0, mib<<20, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, fmt.Errorf("mapping %d MiB: %w", mib, err)
	}
	slice := len(mem) / threads
	tids := make([]int, threads)
	errs := make([]error, threads)
	var touched sync.WaitGroup
	release := make(chan struct{})
	for i := range threads {
		touched.Add(1)
		go func(part []byte) {
			runtime.LockOSThread() // never unlocked: one OS thread per slice for good
			tids[i] = unix.Gettid()
			if errs[i] = unix.SchedSetaffinity(0, &pinned); errs[i] == nil {
				for j := 0; j < len(part); j += os.Getpagesize() {
					part[j] = 1 // first touch: the page is allocated on this CPU's node
				}
			}
			touched.Done()
			<-release
			if err := unix.SchedSetaffinity(0, &all); err != nil {
				return
			}
			var sum uint64
			for {
				for j := 0; j < len(part); j += 64 {
					sum += uint64(part[j])
				}
				streamSink.Store(sum)
			}
		}(mem[i*slice : (i+1)*slice])
	}
	touched.Wait()
	close(release)
	return tids, errors.Join(errs...)
}

// Stream makes the workload map mib MiB, touch it first from threads threads pinned to
// cpus (a kernel CPU list) and then stream over it from them, unpinned; it returns the
// streaming threads' ids once the memory is touched.
func (w *Workload) Stream(mib, threads int, cpus string) ([]int, error) {
	line, err := w.do(fmt.Sprintf("stream %d %d %s", mib, threads, cpus))
	if err != nil {
		return nil, err
	}
	rest, ok := strings.CutPrefix(line, "tids ")
	if !ok {
		return nil, fmt.Errorf("workload answered %q", line)
	}
	var tids []int
	for _, f := range strings.Fields(rest) {
		tid, err := strconv.Atoi(f)
		if err != nil {
			return nil, fmt.Errorf("workload answered %q: %w", line, err)
		}
		tids = append(tids, tid)
	}
	return tids, nil
}

// Workload is a running workload process.
type Workload struct {
	cmd  *exec.Cmd
	in   io.WriteCloser
	out  *bufio.Reader
	once sync.Once
}

// StartWorkload starts a workload process in the container with threads extra OS threads
// and returns once they all run inside the container's cgroups.
func (c *Container) StartWorkload(threads int) (*Workload, error) {
	return c.StartWorkloadWithPolicy(threads, nil)
}

// StartWorkloadWithPolicy is StartWorkload with the workload created holding memory
// policy p (nil: the default), as a runtime creates a container with linux.memoryPolicy.
func (c *Container) StartWorkloadWithPolicy(threads int, p *mempolicy.Policy) (*Workload, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("finding own executable: %w", err)
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), workloadEnv+"=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	outPipe, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := startOnSpawner(cmd, p); err != nil {
		return nil, fmt.Errorf("starting workload: %w", err)
	}
	w := &Workload{cmd: cmd, in: in, out: bufio.NewReader(outPipe)}
	c.lab.workloads = append(c.lab.workloads, w)
	// Move it first, so that the threads it starts next are born inside the container.
	if err := c.Attach(cmd.Process.Pid); err != nil {
		w.Stop()
		return nil, err
	}
	if threads > 0 {
		if _, err := w.do(fmt.Sprintf("threads %d", threads)); err != nil {
			w.Stop()
			return nil, err
		}
	}
	return w, nil
}

// spawner is one goroutine locked to its OS thread for the life of the process. Workloads
// ask for SIGKILL when their parent dies, and Linux means the parent *thread*: a workload
// started from an ordinary goroutine dies whenever the Go runtime retires that thread, as
// it does when a goroutine that locked it exits (the emulator's private tracefs mount does
// exactly that). Starting every workload from this thread ties them to the test process.
// StartOnSpawnerThread starts cmd there; use it for any child with Pdeathsig.
var spawner struct {
	once sync.Once
	reqs chan spawnRequest
}

type spawnRequest struct {
	cmd    *exec.Cmd
	policy *mempolicy.Policy
	done   chan error
}

func StartOnSpawnerThread(cmd *exec.Cmd) error { return startOnSpawner(cmd, nil) }

// startOnSpawner starts cmd on the spawner thread, with memory policy p when not nil: the
// thread takes p for the start alone, so the child, cloned from it, holds p from its first
// instruction and every thread and child of its own inherits it, as a runtime's
// linux.memoryPolicy gives a container's init before exec.
func startOnSpawner(cmd *exec.Cmd, p *mempolicy.Policy) error {
	spawner.once.Do(func() {
		spawner.reqs = make(chan spawnRequest)
		go func() {
			runtime.LockOSThread() // never unlocked: the thread lives as long as the process
			for r := range spawner.reqs {
				r.done <- spawn(r)
			}
		}()
	})
	done := make(chan error, 1)
	spawner.reqs <- spawnRequest{cmd: cmd, policy: p, done: done}
	return <-done
}

// spawn starts r's command on the calling (spawner) thread, under r's policy if any.
func spawn(r spawnRequest) error {
	if r.policy == nil {
		return r.cmd.Start()
	}
	if err := mempolicy.Set(*r.policy); err != nil {
		return fmt.Errorf("the spawner's memory policy: %w", err)
	}
	err := r.cmd.Start()
	return errors.Join(err, mempolicy.Set(mempolicy.Policy{}))
}

// Pid is the workload's process id.
func (w *Workload) Pid() int { return w.cmd.Process.Pid }

// TIDs lists the workload's threads now.
func (w *Workload) TIDs() ([]int, error) { return TasksOf(w.Pid()) }

// Fork makes the workload start a shell (a CLONE_VM child, as Go execs) that forks a
// sleep (a real fork() child); it returns both pids.
func (w *Workload) Fork() (shell, forked int, err error) {
	line, err := w.do("fork")
	if err != nil {
		return 0, 0, err
	}
	if _, err := fmt.Sscanf(line, "pids %d %d", &shell, &forked); err != nil {
		return 0, 0, fmt.Errorf("workload answered %q: %w", line, err)
	}
	return shell, forked, nil
}

// Threads makes the workload start n more OS threads (each locked and idle).
func (w *Workload) Threads(n int) error {
	_, err := w.do(fmt.Sprintf("threads %d", n))
	return err
}

// Alloc makes the workload touch mib MiB of anonymous memory and keep it.
func (w *Workload) Alloc(mib int) error {
	_, err := w.do(fmt.Sprintf("alloc %d", mib))
	return err
}

// RawFork makes the workload fork() a child with a raw clone(SIGCHLD) (Go only, no shell),
// which pauses until the workload ends; it returns the child's pid.
func (w *Workload) RawFork() (int, error) {
	line, err := w.do("rawfork")
	if err != nil {
		return 0, err
	}
	var pid int
	if _, err := fmt.Sscanf(line, "pid %d", &pid); err != nil {
		return 0, fmt.Errorf("workload answered %q: %w", line, err)
	}
	return pid, nil
}

func (w *Workload) do(cmd string) (string, error) {
	if _, err := fmt.Fprintln(w.in, cmd); err != nil {
		return "", fmt.Errorf("sending %q to workload: %w", cmd, err)
	}
	line, err := w.out.ReadString('\n')
	if err != nil {
		return "", fmt.Errorf("reading workload's answer to %q: %w", cmd, err)
	}
	line = strings.TrimSpace(line)
	if strings.HasPrefix(line, "error") {
		return "", errors.New("workload: " + line)
	}
	return line, nil
}

// Stop ends the workload and its children.
func (w *Workload) Stop() {
	w.once.Do(func() {
		w.in.Close()
		w.cmd.Process.Kill()
		w.cmd.Wait()
	})
}

// TasksOf lists the thread ids of process pid from /proc, sorted.
func TasksOf(pid int) ([]int, error) { return numa.ListThreads("/proc", pid) }

// Running tells whether process pid exists and is not a zombie.
func Running(pid int) bool {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && i+2 < len(s) && s[i+2] != 'Z'
}

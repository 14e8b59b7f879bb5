// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build host && linux

package mempolicy

import (
	"bufio"
	"errors"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/numapref/numapref/internal/numa"
	"github.com/numapref/numapref/internal/testutil/poll"
)

// onThread runs f on a thread of its own that ends with it, so that a policy f sets never
// reaches another goroutine.
func onThread(t *testing.T, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread() // not unlocked: the thread exits with the goroutine
		f()
	}()
	<-done
}

// firstNode is a node this process may allocate on.
func firstNode(t *testing.T) int {
	t.Helper()
	_, allowed, err := getMempolicy(mpolFMemsAllowed)
	if err != nil || len(allowed.IDs()) == 0 {
		t.Fatalf("the nodes allowed: %v, %v", allowed, err)
	}
	return allowed.IDs()[0]
}

// A policy set on a thread reads back from get_mempolicy and from that thread's numa_maps;
// a process started from the thread, and the child that process forks, show it in their
// own numa_maps, read from outside.
func TestPolicyReadFromNumaMapsOfTaskAndForkedChild(t *testing.T) {
	node := firstNode(t)
	for _, p := range []Policy{Preferred(node), PreferredMany(numa.NewNodeMask(node), false), PreferredMany(numa.NewNodeMask(node), true)} {
		t.Run(p.String(), func(t *testing.T) {
			var setErr, getErr, threadErr error
			var got, thread Policy
			var cmd *exec.Cmd
			var out *bufio.Reader
			var stdin io.WriteCloser
			onThread(t, func() {
				if setErr = Set(p); setErr != nil {
					return
				}
				got, getErr = Get()
				thread, threadErr = ReadThreadPolicy("/proc", os.Getpid(), unix.Gettid())
				// A shell that forks a child and waits: both inherit the thread's policy.
				cmd = exec.Command("/bin/sh", "-c", "sleep 60 & echo $!; read _; kill $!")
				stdout, err := cmd.StdoutPipe()
				if err != nil {
					setErr = err
					return
				}
				if stdin, setErr = cmd.StdinPipe(); setErr != nil {
					return
				}
				if setErr = cmd.Start(); setErr != nil {
					return
				}
				out = bufio.NewReader(stdout)
			})
			if setErr != nil {
				t.Fatal(setErr)
			}
			if getErr != nil || !got.Equal(p) {
				t.Errorf("get_mempolicy after set_mempolicy %s = %s, %v", p, got, getErr)
			}
			if threadErr != nil || !thread.Equal(p) {
				t.Errorf("the thread's numa_maps after set_mempolicy %s = %s, %v", p, thread, threadErr)
			}
			line, err := out.ReadString('\n')
			if err != nil {
				t.Fatalf("reading the forked child's pid: %v", err)
			}
			child, err := strconv.Atoi(strings.TrimSpace(line))
			if err != nil {
				t.Fatalf("the forked child's pid %q: %v", line, err)
			}
			t.Cleanup(func() { _ = stdin.Close(); _ = unix.Kill(child, unix.SIGKILL); _ = cmd.Process.Kill(); _ = cmd.Wait() })
			for name, pid := range map[string]int{"the started process": cmd.Process.Pid, "its forked child": child} {
				poll.NoError(t, 10*time.Second, name+" shows "+p.String(), func() error {
					got, err := ReadTaskPolicy("/proc", pid)
					if err != nil {
						return err
					}
					if !got.Equal(p) || got.String() != p.String() {
						return errors.New("numa_maps shows " + got.String())
					}
					return nil
				})
			}
		})
	}
}

// This test process itself runs without a policy: its numa_maps shows default.
func TestReadTaskPolicyOfAnOrdinaryProcess(t *testing.T) {
	cmd := exec.Command("/bin/sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	poll.NoError(t, 10*time.Second, "sleep shows the default policy", func() error {
		got, err := ReadTaskPolicy("/proc", cmd.Process.Pid)
		if err != nil {
			return err
		}
		if !got.Equal(Policy{}) {
			return errors.New("numa_maps shows " + got.String())
		}
		return nil
	})
}

// On this machine's kernel (6.10 or later) every soft policy is taken; the probe leaves
// the caller's thread as it was.
func TestProbe(t *testing.T) {
	var before, after Policy
	var s Support
	var err, errBefore, errAfter error
	onThread(t, func() {
		before, errBefore = Get()
		s, err = Probe()
		after, errAfter = Get()
	})
	if err != nil {
		t.Fatal(err)
	}
	want := Support{Preferred: true, PreferredMany: true, PreferredManyBalancing: true, Node: firstNode(t)}
	if s != want {
		t.Errorf("Probe() = %+v; want %+v on a kernel of 6.10 or later", s, want)
	}
	if errBefore != nil || errAfter != nil || !before.Equal(after) {
		t.Errorf("the caller's policy before and after the probe: %s (%v), %s (%v)", before, errBefore, after, errAfter)
	}
}

// Set refuses what numapref never sets; the kernel refuses a node this machine lacks, as
// it does in a runtime's init, where the container then fails to start.
func TestSetRefuses(t *testing.T) {
	onThread(t, func() {
		if err := Set(Policy{Mode: ModeBind, Nodes: numa.NewNodeMask(0)}); !errors.Is(err, ErrNotSoft) {
			t.Errorf("Set(bind:0) = %v; want ErrNotSoft", err)
		}
		if err := Set(Preferred(1023)); !errors.Is(err, unix.EINVAL) {
			t.Errorf("Set(prefer:1023) = %v; want EINVAL", err)
		}
		if took, err := tryPolicy(Preferred(1023)); took || err != nil {
			t.Errorf("the probe's try of prefer:1023 = %v, %v; want not taken, no error", took, err)
		}
		if err := Set(Preferred(1024)); err == nil {
			t.Error("Set(prefer:1024): no error for a node beyond any kernel's")
		}
		if p, err := Get(); err != nil || !p.Equal(Policy{}) {
			t.Errorf("after the refusals the thread's policy is %s, %v; want default", p, err)
		}
	})
}

// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build linux

package numa

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/numapref/numapref/internal/testutil/poll"
	"github.com/numapref/numapref/internal/testutil/testenv"
)

// A thread's pidfd stays alive while the thread runs and reports it gone once it exits:
// from then on its id may name another task.
func TestPIDFDOfAThreadReportsItsExit(t *testing.T) {
	tid, exit := startThread(t)
	p, err := OpenPIDFD(tid, os.Getpid())
	testenv.RequireNoError(t, err, "a pidfd for a thread (PIDFD_THREAD, Linux 6.9)", "a kernel of 6.9 or later")
	defer p.Close()
	if alive, err := p.Alive(); !alive || err != nil {
		t.Fatalf("Alive() of a running thread = %v, %v; want true", alive, err)
	}
	close(exit)
	poll.NoError(t, 10*time.Second, fmt.Sprintf("the pidfd of thread %d reports it gone after it exited", tid), func() error {
		alive, err := p.Alive()
		if err != nil {
			t.Fatal(err)
		}
		if alive {
			return errors.New("it still reports the thread alive")
		}
		return nil
	})
}

// startThread starts an OS thread of this process that exits when exit is closed.
func startThread(t *testing.T) (tid int, exit chan struct{}) {
	t.Helper()
	exit = make(chan struct{})
	main := make(chan struct{})
	t.Cleanup(func() { close(main) })
	for {
		tids := make(chan int)
		go func() {
			runtime.LockOSThread()
			tid := unix.Gettid()
			tids <- tid
			if tid == os.Getpid() {
				// The main thread, which Go never ends: keep it busy so the next goroutine
				// gets another thread.
				<-main
				runtime.UnlockOSThread()
				return
			}
			<-exit // and the thread ends with the goroutine: it never unlocked it
		}()
		if tid = <-tids; tid != os.Getpid() {
			return tid, exit
		}
	}
}

func TestOpenPIDFD(t *testing.T) {
	p, err := OpenPIDFD(os.Getpid(), os.Getpid())
	if err != nil {
		t.Fatalf("OpenPIDFD(own process): %v", err)
	}
	if alive, err := p.Alive(); !alive || err != nil {
		t.Errorf("Alive() of this process = %v, %v; want true", alive, err)
	}
	if err := p.Close(); err != nil {
		t.Error(err)
	}
	// Above PID_MAX_LIMIT (2^22): no task has this id.
	if _, err := OpenPIDFD(1<<22+7, 0); !errors.Is(err, ErrTaskGone) {
		t.Errorf("OpenPIDFD(unused id) = %v, want ErrTaskGone", err)
	}
}

// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build linux

package emulator

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// cloneTrace reads the kernel's task:task_newtask tracepoint, which carries the clone flags
// and the creating thread of every new task, from a trace instance of its own
// (instances/numapref-emulator-<pid>-<n> under tracefs), so that no global tracing setting
// changes: the instance has its own ring buffer, clock ("mono", the proc connector's
// CLOCK_MONOTONIC) and event switches, and is removed by close. Only the listener uses it,
// from its own goroutine.
//
// Where tracefs comes from (cloneTraceOptions): a mount at the given root; by default
// <sysRoot>/kernel/tracing, then <sysRoot>/kernel/debug/tracing; failing those, if allowed,
// a tracefs mounted in a private mount namespace of one short-lived thread, which nobody
// else sees and which goes away with the file descriptors that hold it.
type cloneTrace struct {
	root     int    // tracefs root directory
	instance string // "instances/<name>", relative to root
	pipe     int    // the instance's trace_pipe, non-blocking
	source   string // where tracefs came from, for Support

	buf     []byte
	partial []byte
	log     *birthLog
	closed  atomic.Bool
}

const (
	tracefsMagic       = 0x74726163
	cloneTraceHorizon  = 5 * time.Second // the listener handles fork events within moments
	cloneTraceBufferKB = 512             // per CPU; task_newtask entries take about 48 bytes
	traceInstancePfx   = "numapref-emulator-"
)

// instanceSeq numbers the instances of one process.
var instanceSeq atomic.Uint64

type cloneTraceOptions struct {
	// Root is tracefs's mount point; "" tries the usual places under SysRoot, then a
	// private mount if AllowPrivateMount.
	Root, SysRoot     string
	AllowPrivateMount bool
}

func openCloneTrace(opts cloneTraceOptions) (*cloneTrace, error) {
	root, source, err := openTracefs(opts)
	if err != nil {
		return nil, err
	}
	t := &cloneTrace{root: root, pipe: -1, source: source, buf: make([]byte, 64<<10),
		log: newBirthLog(uint64(cloneTraceHorizon / time.Microsecond))}
	removeStaleInstances(root)
	name := fmt.Sprintf("%s%d-%d", traceInstancePfx, os.Getpid(), instanceSeq.Add(1))
	t.instance = filepath.Join("instances", name)
	if err := unix.Mkdirat(root, t.instance, 0o700); err != nil {
		unix.Close(root)
		return nil, fmt.Errorf("creating trace instance %s (%s): %w", name, source, err)
	}
	if err := t.setup(); err != nil {
		t.close()
		return nil, fmt.Errorf("trace instance %s (%s): %w", name, source, err)
	}
	return t, nil
}

func (t *cloneTrace) setup() error {
	for _, w := range []struct{ file, value string }{
		{"trace_clock", "mono"},
		{"buffer_size_kb", strconv.Itoa(cloneTraceBufferKB)},
		{"events/task/task_newtask/enable", "1"},
	} {
		if err := t.write(w.file, w.value); err != nil {
			return err
		}
	}
	fd, err := unix.Openat(t.root, filepath.Join(t.instance, "trace_pipe"), unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("opening trace_pipe: %w", err)
	}
	t.pipe = fd
	return nil
}

func (t *cloneTrace) write(file, value string) error {
	fd, err := unix.Openat(t.root, filepath.Join(t.instance, file), unix.O_WRONLY|unix.O_TRUNC|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("opening %s: %w", file, err)
	}
	defer unix.Close(fd)
	if _, err := unix.Write(fd, []byte(value+"\n")); err != nil {
		return fmt.Errorf("writing %q to %s: %w", value, file, err)
	}
	return nil
}

// close removes the instance. A trace_pipe still open keeps the instance busy, so the pipe
// goes first.
func (t *cloneTrace) close() error {
	if !t.closed.CompareAndSwap(false, true) {
		return nil
	}
	if t.pipe >= 0 {
		unix.Close(t.pipe)
	}
	err := unix.Unlinkat(t.root, t.instance, unix.AT_REMOVEDIR)
	unix.Close(t.root)
	if err != nil {
		return fmt.Errorf("removing trace instance %s: %w", t.instance, err)
	}
	return nil
}

// drain reads every event the instance holds now into the log. (Tests make a trace
// without a pipe and fill its log themselves.)
func (t *cloneTrace) drain() error {
	for t.pipe >= 0 {
		n, err := unix.Read(t.pipe, t.buf)
		switch {
		case err == unix.EINTR:
			continue
		case err == unix.EAGAIN:
			return nil
		case err != nil:
			return fmt.Errorf("reading trace_pipe: %w", err)
		case n == 0:
			return nil
		}
		readUs := uint64(monotonicNow()) / 1000
		data := t.buf[:n]
		if len(t.partial) > 0 { // rare: trace_pipe hands out whole lines
			data = append(append([]byte(nil), t.partial...), data...)
			t.partial = t.partial[:0]
		}
		for len(data) > 0 {
			nl := bytes.IndexByte(data, '\n')
			if nl < 0 {
				t.partial = append(t.partial, data...)
				break
			}
			b, kind := parseTraceLine(string(data[:nl]))
			t.log.add(b, kind, readUs)
			data = data[nl+1:]
		}
	}
	return nil
}

// lookup finds the task_newtask event of the fork event that made pid at forkNs
// (CLOCK_MONOTONIC ns). The tracepoint fires after the connector's event; if the event is
// not there yet it waits for it, at most wait.
func (t *cloneTrace) lookup(pid int, forkNs uint64, wait time.Duration) (traceBirth, birthAnswer, error) {
	deadline := time.Now().Add(wait)
	for {
		if err := t.drain(); err != nil {
			return traceBirth{}, birthUncertain, err
		}
		b, answer := t.log.find(pid, forkNs)
		remaining := time.Until(deadline)
		if answer != birthNotYet || remaining <= 0 {
			return b, answer, nil
		}
		fds := []unix.PollFd{{Fd: int32(t.pipe), Events: unix.POLLIN}}
		// trace_pipe's poll wakes readers from irq_work after a commit; poll in short
		// slices all the same, in case a wakeup is deferred.
		_, _ = unix.Poll(fds, int(min(remaining, 10*time.Millisecond)/time.Millisecond)+1)
	}
}

// openTracefs returns a directory descriptor of tracefs's root and says where it is.
func openTracefs(opts cloneTraceOptions) (int, string, error) {
	candidates := []string{opts.Root}
	if opts.Root == "" {
		sys := opts.SysRoot
		if sys == "" {
			sys = "/sys"
		}
		candidates = []string{filepath.Join(sys, "kernel", "tracing"), filepath.Join(sys, "kernel", "debug", "tracing")}
	}
	var why []string
	for _, dir := range candidates {
		fd, err := openTracefsDir(dir)
		if err == nil {
			return fd, dir, nil
		}
		why = append(why, err.Error())
	}
	if opts.Root != "" || !opts.AllowPrivateMount {
		return -1, "", fmt.Errorf("no tracefs: %s", strings.Join(why, "; "))
	}
	fd, err := mountPrivateTracefs()
	if err != nil {
		why = append(why, err.Error())
		return -1, "", fmt.Errorf("no tracefs: %s", strings.Join(why, "; "))
	}
	return fd, "a private tracefs mount", nil
}

func openTracefsDir(dir string) (int, error) {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("%s: %w", dir, err)
	}
	var st unix.Statfs_t
	if err := unix.Fstatfs(fd, &st); err != nil || st.Type != tracefsMagic {
		unix.Close(fd)
		return -1, fmt.Errorf("%s: tracefs is not mounted there", dir)
	}
	if err := unix.Faccessat(fd, "instances", unix.W_OK, 0); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("%s/instances: %w", dir, err)
	}
	return fd, nil
}

// mountPrivateTracefs mounts tracefs in a mount namespace of its own, made by a thread that
// then ends: no other process or thread sees the mount, and the returned descriptor keeps
// it alive until it is closed. Needs CAP_SYS_ADMIN.
func mountPrivateTracefs() (int, error) {
	type result struct {
		fd  int
		err error
	}
	done := make(chan result, 1)
	go func() {
		// Never unlocked: the thread, and the mount namespace with it, end with the goroutine.
		runtime.LockOSThread()
		fd, err := func() (int, error) {
			if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
				return -1, fmt.Errorf("private tracefs mount: unshare: %w", err)
			}
			if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
				return -1, fmt.Errorf("private tracefs mount: making mounts private: %w", err)
			}
			// Any directory will do as the mount point, as nobody else sees it.
			dir := "/sys/kernel/tracing"
			if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
				dir = os.TempDir()
			}
			if err := unix.Mount("tracefs", dir, "tracefs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
				return -1, fmt.Errorf("private tracefs mount: %w", err)
			}
			return openTracefsDir(dir)
		}()
		done <- result{fd, err}
	}()
	r := <-done
	return r.fd, r.err
}

// removeStaleInstances removes instances left by emulator processes that died without
// closing theirs.
func removeStaleInstances(root int) {
	fd, err := unix.Openat(root, "instances", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return
	}
	dir := os.NewFile(uintptr(fd), "instances")
	defer dir.Close()
	names, err := dir.Readdirnames(-1)
	if err != nil {
		return
	}
	for _, name := range names {
		rest, ok := strings.CutPrefix(name, traceInstancePfx)
		if !ok {
			continue
		}
		pidText, _, _ := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(pidText)
		if err != nil || pid <= 0 || pid == os.Getpid() {
			continue
		}
		if err := unix.Kill(pid, 0); errors.Is(err, unix.ESRCH) {
			_ = unix.Unlinkat(fd, name, unix.AT_REMOVEDIR)
		}
	}
}

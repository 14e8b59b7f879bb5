// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build linux

// Command init is PID 1 of the kernel lab's initramfs (see hack/kernel/run.sh).
//
// It mounts the kernel filesystems, loads the modules of /kernellab/modules (if any),
// brings up lo and the network interface /kernellab/net names (if any; net.go), turns
// automatic NUMA balancing on, runs the
// test binaries of /kernellab/manifest one after another with their output
// streamed to the serial console between markers (console.go), copies the
// report files each test leaves in its report directory to the console, and
// powers the VM off.
//
// Every test gets, besides the manifest's env lines:
//
//	KERNELLAB=1
//	KERNELLAB_TEST=<name>
//	KERNELLAB_REPORT_DIR=/kernellab/reports/<name>   every file left here is dumped
//	NUMAPREF_CONFORMANCE_REPORT=/kernellab/reports/<name>/conformance.jsonl
//	TMPDIR=/tmp/<name>                               also its working directory
package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

const (
	manifestPath = "/kernellab/manifest"
	reportRoot   = "/kernellab/reports"
	workRoot     = "/tmp"
	// maxReportBytes bounds one dumped report: the serial console is slow
	// enough that a runaway file would eat the VM's whole time budget.
	maxReportBytes = 32 << 20
	// consoleLogLevel keeps the kernel's own messages below warnings off the
	// console while tests write to it, so they do not split the tests' lines.
	consoleLogLevel = "4"
)

func main() {
	if os.Getpid() != 1 {
		fmt.Fprintln(os.Stderr, "kernellab init: runs only as PID 1 of the lab VM (hack/kernel/run.sh)")
		os.Exit(2)
	}
	run()
	powerOff()
}

func logf(format string, args ...any) {
	fmt.Printf("kernellab: "+format+"\n", args...)
}

// run does everything between boot and power-off. A panic here must still end
// in a power-off, or qemu would sit until run.sh's timeout.
func run() {
	defer func() {
		if r := recover(); r != nil {
			logf("init panicked: %v\n%s", r, debug.Stack())
		}
	}()

	mountAll()
	loadModules()
	configureNetwork()
	tune()
	fmt.Println(marker(kindInit, "kernel", kernelRelease(), "nodes", readTrimmed("/sys/devices/system/node/online"),
		"cpus", readTrimmed("/sys/devices/system/cpu/online"), "uptime", uptime()))

	tests, timeout, env, err := plan()
	if err != nil {
		logf("%v", err)
		fmt.Println(marker(kindSummary, "tests", "0", "passed", "0", "failed", "1", "error", "bad-plan"))
		return
	}

	names := make([]string, len(tests))
	for i, t := range tests {
		names[i] = t.Name
	}
	fmt.Println(marker(kindPlan, "tests", strings.Join(names, ",")))

	passed := 0
	for _, t := range tests {
		if runTest(t, env, timeout) {
			passed++
		}
		dumpReports(t.Name)
	}
	dumpKmsg()
	fmt.Println(marker(kindSummary, "tests", strconv.Itoa(len(tests)), "passed", strconv.Itoa(passed),
		"failed", strconv.Itoa(len(tests)-passed)))
}

// mountAll mounts what tests expect of a booted system. debugfs and tracefs
// are optional: a kernel without them still runs the tests that need neither.
func mountAll() {
	const nsn = syscall.MS_NOSUID | syscall.MS_NODEV | syscall.MS_NOEXEC
	mounts := []struct {
		source, target, fstype string
		flags                  uintptr
		data                   string
		optional               bool
	}{
		{"devtmpfs", "/dev", "devtmpfs", syscall.MS_NOSUID, "mode=0755", false},
		{"proc", "/proc", "proc", nsn, "", false},
		{"sysfs", "/sys", "sysfs", nsn, "", false},
		{"cgroup2", "/sys/fs/cgroup", "cgroup2", nsn, "", false},
		{"debugfs", "/sys/kernel/debug", "debugfs", nsn, "", true},
		{"tracefs", "/sys/kernel/tracing", "tracefs", nsn, "", true},
	}
	for _, m := range mounts {
		if err := os.MkdirAll(m.target, 0o755); err != nil {
			logf("creating %s: %v", m.target, err)
		}
		if err := syscall.Mount(m.source, m.target, m.fstype, m.flags, m.data); err != nil {
			level := "error"
			if m.optional {
				level = "note"
			}
			logf("%s: mounting %s on %s: %v", level, m.fstype, m.target, err)
		}
	}
	for _, dir := range []string{workRoot, reportRoot} {
		if err := os.MkdirAll(dir, 0o1777); err != nil {
			logf("creating %s: %v", dir, err)
		}
	}
}

// tune turns automatic NUMA balancing on (the forced preferred node acts only
// through it), quiets the console and delegates cpuset, cpu and memory to child
// cgroups so tests can make their own.
func tune() {
	writes := []struct{ file, value string }{
		{"/proc/sys/kernel/numa_balancing", "1"},
		{"/proc/sys/kernel/printk", consoleLogLevel},
	}
	for _, w := range writes {
		if err := os.WriteFile(w.file, []byte(w.value), 0o644); err != nil {
			logf("writing %s to %s: %v", w.value, w.file, err)
		}
	}
	logf("kernel.numa_balancing=%s", readTrimmed("/proc/sys/kernel/numa_balancing"))

	available := strings.Fields(readTrimmed("/sys/fs/cgroup/cgroup.controllers"))
	var enable []string
	for _, c := range []string{"cpuset", "cpu", "memory"} {
		if slices.Contains(available, c) {
			enable = append(enable, "+"+c)
		}
	}
	if len(enable) > 0 {
		if err := os.WriteFile("/sys/fs/cgroup/cgroup.subtree_control", []byte(strings.Join(enable, " ")), 0o644); err != nil {
			logf("enabling %v in the root cgroup: %v", enable, err)
		}
	}
	logf("cgroup2 subtree_control=%q", readTrimmed("/sys/fs/cgroup/cgroup.subtree_control"))
}

// plan reads the manifest and the kernellab.* boot options into the list of
// tests to run, their timeout and the environment they share.
func plan() ([]test, time.Duration, []string, error) {
	f, err := os.Open(manifestPath)
	if err != nil {
		return nil, 0, nil, fmt.Errorf("opening manifest: %w", err)
	}
	defer f.Close()
	m, err := parseManifest(f)
	if err != nil {
		return nil, 0, nil, fmt.Errorf("parsing %s: %w", manifestPath, err)
	}
	cmdline, err := os.ReadFile("/proc/cmdline")
	if err != nil {
		return nil, 0, nil, fmt.Errorf("reading the kernel command line: %w", err)
	}
	opts, err := parseCmdline(string(cmdline))
	if err != nil {
		return nil, 0, nil, err
	}
	tests, err := selectTests(m, opts)
	if err != nil {
		return nil, 0, nil, err
	}
	timeout := m.Timeout
	if opts.Timeout > 0 {
		timeout = opts.Timeout
	}
	return tests, timeout, m.Env, nil
}

// runTest runs one binary with its output on the console between markers and
// reports whether it passed.
func runTest(t test, manifestEnv []string, timeout time.Duration) bool {
	work := filepath.Join(workRoot, t.Name)
	reports := filepath.Join(reportRoot, t.Name)
	for _, dir := range []string{work, reports} {
		if err := os.MkdirAll(dir, 0o777); err != nil {
			logf("creating %s: %v", dir, err)
		}
	}
	env := []string{
		"PATH=/kernellab/bin:/usr/bin:/bin",
		"HOME=" + work,
		"TMPDIR=" + work,
		"KERNELLAB=1",
		"KERNELLAB_TEST=" + t.Name,
		"KERNELLAB_REPORT_DIR=" + reports,
		"NUMAPREF_CONFORMANCE_REPORT=" + filepath.Join(reports, "conformance.jsonl"),
	}
	// The manifest's lines come last so they can override the defaults, and
	// the test's own after the shared ones (exec keeps the last value of a
	// repeated key).
	env = append(env, manifestEnv...)
	env = append(env, t.Env...)

	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, t.Path, t.Args...)
	cmd.Dir = work
	cmd.Env = env
	cmd.Stdout = os.Stdout
	cmd.Stderr = os.Stdout
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }

	fmt.Println(marker(kindBeginTest, "name", t.Name, "path", t.Path, "args", strings.Join(t.Args, ","),
		"timeout", timeout.String(), "uptime", uptime()))
	start := time.Now()
	err := cmd.Run()
	elapsed := time.Since(start)
	if cmd.Process != nil {
		// Whatever the test left running in its process group goes with it.
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	reapOrphans()

	status, code := "pass", 0
	var exitErr *exec.ExitError
	switch {
	case err == nil:
	case ctx.Err() != nil:
		status, code = "timeout", -1
	case errors.As(err, &exitErr):
		status, code = "fail", exitErr.ExitCode()
	default:
		status, code = "error", -1
		logf("starting %s: %v", t.Path, err)
	}
	fmt.Println(marker(kindEndTest, "name", t.Name, "status", status, "exit", strconv.Itoa(code),
		"elapsed", fmt.Sprintf("%.2fs", elapsed.Seconds()), "uptime", uptime()))
	return status == "pass"
}

// reapOrphans collects the zombies that tests' orphaned children leave to PID 1.
func reapOrphans() {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return
		}
	}
}

// dumpReports copies every regular file under the test's report directory to
// the console, each between markers.
func dumpReports(name string) {
	dir := filepath.Join(reportRoot, name)
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.Type().IsRegular() {
			return nil
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		dumpReport(name, rel, path)
		return nil
	})
	if err != nil {
		logf("listing reports of %s: %v", name, err)
	}
}

func dumpReport(name, rel, path string) {
	f, err := os.Open(path)
	if err != nil {
		logf("opening report %s: %v", path, err)
		return
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		logf("reading report %s: %v", path, err)
		return
	}
	fmt.Println(marker(kindBeginReport, "name", name, "file", rel, "bytes", strconv.FormatInt(info.Size(), 10)))
	n, err := io.Copy(os.Stdout, io.LimitReader(f, maxReportBytes))
	if err != nil {
		logf("copying report %s: %v", path, err)
	}
	if n > 0 && !endsWithNewline(f, n) {
		fmt.Println()
	}
	truncated := "no"
	if info.Size() > maxReportBytes {
		truncated = "yes"
	}
	fmt.Println(marker(kindEndReport, "name", name, "file", rel, "truncated", truncated))
}

func endsWithNewline(f *os.File, n int64) bool {
	b := make([]byte, 1)
	_, err := f.ReadAt(b, n-1)
	return err == nil && b[0] == '\n'
}

// dumpKmsg prints the kernel's log records at warning level and above (a WARN,
// BUG or oops from a patched kernel path shows here) between markers.
func dumpKmsg() {
	fmt.Println(marker(kindBeginKmsg))
	defer fmt.Println(marker(kindEndKmsg))
	fd, err := syscall.Open("/dev/kmsg", syscall.O_RDONLY|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		logf("opening /dev/kmsg: %v", err)
		return
	}
	defer syscall.Close(fd)
	buf := make([]byte, 16<<10)
	for {
		n, err := syscall.Read(fd, buf)
		if errors.Is(err, syscall.EPIPE) {
			continue // records were overwritten while reading; go on with the next
		}
		if err != nil || n <= 0 {
			return
		}
		if line, ok := kmsgLine(buf[:n], 4); ok {
			fmt.Println(line)
		}
	}
}

// kmsgLine formats a /dev/kmsg record ("prio,seq,usec,flags;text\n" plus
// optional " KEY=value" lines) when its level is at most maxLevel.
func kmsgLine(record []byte, maxLevel int) (string, bool) {
	header, text, ok := bytes.Cut(record, []byte(";"))
	if !ok {
		return "", false
	}
	fields := strings.Split(string(header), ",")
	if len(fields) < 3 {
		return "", false
	}
	prio, err1 := strconv.Atoi(fields[0])
	usec, err2 := strconv.ParseInt(fields[2], 10, 64)
	if err1 != nil || err2 != nil || prio&7 > maxLevel {
		return "", false
	}
	text, _, _ = bytes.Cut(text, []byte("\n"))
	return fmt.Sprintf("[%5d.%06d] <%d> %s", usec/1e6, usec%1e6, prio&7, text), true
}

func powerOff() {
	fmt.Println(marker(kindPoweroff, "uptime", uptime()))
	syscall.Sync()
	err := syscall.Reboot(syscall.LINUX_REBOOT_CMD_POWER_OFF)
	// Still here: exiting makes the kernel panic, and with panic=-1 and
	// qemu's -no-reboot that too ends the VM (run.sh reports it).
	logf("power-off failed: %v", err)
	os.Exit(1)
}

func kernelRelease() string {
	var u syscall.Utsname
	if err := syscall.Uname(&u); err != nil {
		return "unknown"
	}
	var b strings.Builder
	for _, c := range u.Release {
		if c == 0 {
			break
		}
		b.WriteByte(byte(c))
	}
	return b.String()
}

func uptime() string {
	fields := strings.Fields(readTrimmed("/proc/uptime"))
	if len(fields) == 0 {
		return "-"
	}
	return fields[0]
}

func readTrimmed(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

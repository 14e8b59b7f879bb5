// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build linux

package conformance

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"unsafe"
)

const (
	tracingRoot = "/sys/kernel/tracing"
	// prGetName is the canary: a harmless prctl the witness must see, so that seeing no
	// prctl(PR_PREFERRED_NID) means something.
	prGetName = 16
)

// Main runs the tests (use it as TestMain's body: os.Exit(conformance.Main(m))), with the
// prctl witness on the kernel lab's control kernel (see RunWithPrctlWitness). Helper
// processes (the binary re-executed by Run) run their part without a witness of their own.
func Main(m *testing.M) int {
	if os.Getenv(envRequest) != "" {
		return m.Run()
	}
	return RunWithPrctlWitness(m, prctlOptionFromEnv())
}

// RunWithPrctlWitness runs m. On the kernel lab's control kernel (KERNELLAB_KERNEL=control)
// it has the kernel record every prctl with the given option number issued meanwhile, by
// any task, and fails the binary if there was one: on a kernel without the patch that
// number may be another prctl (PR_FUTEX_HASH since ~6.16), so nothing may issue it there.
func RunWithPrctlWitness(m *testing.M, option int) int {
	var w *prctlWitness
	if os.Getenv("KERNELLAB_KERNEL") == "control" {
		var err error
		if w, err = startPrctlWitness(tracingRoot, option); err != nil {
			fmt.Printf("FAIL: prctl witness: not available: %v\n", err)
			return 1
		}
	}
	code := m.Run()
	if w != nil {
		if err := w.stop(); err != nil {
			fmt.Printf("FAIL: prctl witness: %v\n", err)
			code = 1
		}
	}
	return code
}

func prctlOptionFromEnv() int {
	var n int
	if _, err := fmt.Sscan(os.Getenv("NUMAPREF_PRCTL_OPTION"), &n); err == nil && n > 0 {
		return n
	}
	return 78
}

// prctlWitness is the sys_enter_prctl trace event, filtered to the option and the canary.
type prctlWitness struct {
	root   string
	event  string
	option int
	// wasOn: the event was enabled before (trace_event= on the kernel command line). The
	// witness then never switches it: switching patches kernel text under running threads,
	// which crashed a kernel under qemu TCG.
	wasOn bool
}

func startPrctlWitness(root string, option int) (*prctlWitness, error) {
	w := &prctlWitness{root: root, event: filepath.Join(root, "events/syscalls/sys_enter_prctl"), option: option}
	if _, err := os.Stat(w.event); err != nil {
		return nil, fmt.Errorf("no syscall trace events: %w", err)
	}
	on, err := os.ReadFile(filepath.Join(w.event, "enable"))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", filepath.Join(w.event, "enable"), err)
	}
	w.wasOn = strings.TrimSpace(string(on)) == "1"
	writes := []struct{ file, value string }{
		{filepath.Join(w.event, "filter"), fmt.Sprintf("option == %d || option == %d", option, prGetName)},
		{filepath.Join(root, "trace"), ""}, // clears the buffer
	}
	if !w.wasOn {
		writes = append(writes, struct{ file, value string }{filepath.Join(w.event, "enable"), "1"})
	}
	for _, wr := range writes {
		if err := os.WriteFile(wr.file, []byte(wr.value), 0o644); err != nil {
			return nil, fmt.Errorf("writing %q to %s: %w", wr.value, wr.file, err)
		}
	}
	return w, nil
}

// stop issues the canary, stops recording and checks the trace: the canary must be there,
// the option must not.
func (w *prctlWitness) stop() error {
	var name [16]byte
	if _, _, errno := syscall.Syscall(syscall.SYS_PRCTL, prGetName, uintptr(unsafe.Pointer(&name[0])), 0); errno != 0 {
		return fmt.Errorf("canary prctl(PR_GET_NAME): %w", errno)
	}
	if !w.wasOn {
		if err := os.WriteFile(filepath.Join(w.event, "enable"), []byte("0"), 0o644); err != nil {
			return fmt.Errorf("disabling sys_enter_prctl: %w", err)
		}
	}
	f, err := os.Open(filepath.Join(w.root, "trace"))
	if err != nil {
		return fmt.Errorf("reading the trace: %w", err)
	}
	defer f.Close()
	canary, forbidden := 0, []string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.Contains(line, fmt.Sprintf("sys_prctl(option: %x,", w.option)):
			forbidden = append(forbidden, line)
		case strings.Contains(line, fmt.Sprintf("sys_prctl(option: %x,", prGetName)):
			canary++
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("reading the trace: %w", err)
	}
	if canary == 0 {
		return fmt.Errorf("the trace missed the canary prctl(%d): it proves nothing", prGetName)
	}
	if len(forbidden) > 0 {
		return fmt.Errorf("prctl %d was issued on the control kernel:\n%s", w.option, strings.Join(forbidden, "\n"))
	}
	fmt.Printf("prctl witness: the kernel traced %d canary prctl(%d) call(s) and no prctl(%d) while the tests ran\n",
		canary, prGetName, w.option)
	return nil
}

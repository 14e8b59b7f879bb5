// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

// Package conformance is one suite of PR_PREFERRED_NID cases that every backend of
// prctl.Raw must pass: the emulator (package emulator) on any machine, and the real patched
// kernel (prctl.Prctl), where the suite runs as a standalone test binary (go test -c)
// inside a VM.
//
// Cases that need other processes (another uid, a fork() child, a CLONE_VM child, new
// threads, exec) re-execute the test binary as a helper process: Run notices the helper
// request in its environment, opens the backend the same way, plays its part and returns.
//
// When NUMAPREF_CONFORMANCE_REPORT names a file, every case appends one JSON line to it:
// the case, the backend, each call (command, target, node, pointer, return value, errno
// name, value read) and the values observed, so kernel and emulator runs can be diffed.
//
// Run runs the cases any user can run; RunAsRoot the cases that change credentials (uid
// 1000, dropping CAP_SYS_PTRACE), which need root, so its tests are in the host tier. The
// real kernel's tests (TestPrctl, TestPrctlAsRoot) carry the kernellab tag: only the lab's
// VM has a patched kernel, so no other tier compiles them.
//
//	go test ./internal/testutil/conformance                 # TestEmulator
//	sudo go test -tags host ./internal/testutil/conformance # and TestEmulatorAsRoot
//	go test -c -tags host,kernellab -o conformance.test ./internal/testutil/conformance
//	./conformance.test -test.v                              # inside the kernel lab's VM, as root
//
// Environment: NUMAPREF_CONFORMANCE_IMPL=prctl|emulator runs one backend only (both when
// unset); NUMAPREF_PRCTL_OPTION is the patch's option number (default 78, v3 used 79);
// NUMAPREF_CONFORMANCE_REPORT is the JSON-lines report file. The fork() and held CLONE_VM
// cases need amd64.
package conformance

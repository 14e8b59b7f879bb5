// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package prctl

import (
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"unsafe"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"
)

// countingPrctl counts calls and answers like a patched kernel whose only task holds
// force: GET stores it (EINVAL misaligned, EFAULT nil), SET stores nid.
type countingPrctl struct {
	calls   atomic.Int64
	options []int
	force   int32
	errno   error // returned by every call when set
}

func (c *countingPrctl) fn(option int, cmd, pid, nid uintptr, addr unsafe.Pointer) error {
	c.calls.Add(1)
	c.options = append(c.options, option)
	if c.errno != nil {
		return c.errno
	}
	switch cmd {
	case CmdGet:
		switch {
		case addr == nil:
			return unix.EFAULT
		case uintptr(addr)&3 != 0:
			return unix.EINVAL
		}
		*(*int32)(addr) = c.force
	case CmdSet:
		c.force = int32(nid)
	default:
		return unix.ERANGE
	}
	return nil
}

// TestPrctlUnsupportedHere runs on this machine's real /proc: its kernel (6.18) has no
// numa_preferred_nid_force line, and 78 is PR_FUTEX_HASH there. Not one prctl may be issued.
func TestPrctlUnsupportedHere(t *testing.T) {
	var c countingPrctl
	p, support := newPrctl(DefaultOption, "/proc", c.fn)
	if sched, err := readThreadSelfSched("/proc"); err == nil && sched.ForcePresent {
		// A selection, not a precondition: this test is about kernels without the patch; the
		// patched kernel's prctl is the conformance suite's (TestPrctl).
		t.Skip("this kernel has the PR_PREFERRED_NID patch")
	}
	if support.Supported || support.Backend != "prctl" || support.Option != DefaultOption {
		t.Errorf("Support = %+v, want unsupported prctl option 78", support)
	}
	if !strings.Contains(support.Reason, "numa_preferred_nid_force") || !strings.Contains(support.Reason, "no prctl was issued") {
		t.Errorf("Reason %q does not say why", support.Reason)
	}
	if _, err := p.Get(0); !errors.Is(err, ErrUnsupported) {
		t.Errorf("Get: %v, want ErrUnsupported", err)
	}
	if err := p.Set(0, 0); !errors.Is(err, ErrUnsupported) {
		t.Errorf("Set: %v, want ErrUnsupported", err)
	}
	if err := p.Set(0, -1); !errors.Is(err, ErrUnsupported) {
		t.Errorf("Set -1: %v, want ErrUnsupported", err)
	}
	if v, err := p.Call(CmdSet, 0, 1, PointerNil); !errors.Is(err, ErrUnsupported) || v != PointerSentinel {
		t.Errorf("Call: %d, %v, want ErrUnsupported", v, err)
	}
	if n := c.calls.Load(); n != 0 {
		t.Fatalf("%d prctl calls issued on a kernel that did not prove support", n)
	}
	// The exported constructor says the same.
	if _, s := New(DefaultOption, "/proc"); s != support {
		t.Errorf("New support %+v, want %+v", s, support)
	}
}

func TestPrctlProof(t *testing.T) {
	tests := map[string]struct {
		procRoot      string
		option        int
		force         int32
		errno         error
		wantSupported bool
		wantCalls     int64
		wantReason    string
	}{
		"unpatched kernel":       {procRoot: "../testdata/proc/unpatched", option: 78, wantReason: "no numa_preferred_nid_force line"},
		"no NUMA balancing":      {procRoot: "../testdata/proc/no-numa-balancing", option: 78, wantReason: "no NUMA lines"},
		"no sched file":          {procRoot: "../testdata/proc/absent", option: 78, wantReason: "CONFIG_SCHED_DEBUG"},
		"invalid option":         {procRoot: "../testdata/proc/patched", option: 0, wantReason: "invalid prctl option"},
		"patched, GET agrees":    {procRoot: "../testdata/proc/patched", option: 78, force: -1, wantSupported: true, wantCalls: 1, wantReason: "agreed"},
		"patched, option 79":     {procRoot: "../testdata/proc/patched", option: 79, force: -1, wantSupported: true, wantCalls: 1, wantReason: "prctl(79, GET) agreed"},
		"patched, GET disagrees": {procRoot: "../testdata/proc/patched", option: 78, force: 3, wantCalls: 1, wantReason: "is not PR_PREFERRED_NID"},
		"patched, wrong option":  {procRoot: "../testdata/proc/patched", option: 78, errno: unix.EINVAL, wantCalls: 1, wantReason: "failed"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c := countingPrctl{force: tc.force, errno: tc.errno}
			_, support := newPrctl(tc.option, tc.procRoot, c.fn)
			if support.Supported != tc.wantSupported || !strings.Contains(support.Reason, tc.wantReason) {
				t.Errorf("Support = %+v, want supported %v, reason containing %q", support, tc.wantSupported, tc.wantReason)
			}
			if got := c.calls.Load(); got != tc.wantCalls {
				t.Errorf("%d calls, want %d", got, tc.wantCalls)
			}
			for _, o := range c.options {
				if o != tc.option {
					t.Errorf("call with option %d, want %d", o, tc.option)
				}
			}
		})
	}
}

// TestPrctlCall checks what the backend passes to the system call, on a kernel that
// proved support (a fixture) with the call faked.
func TestPrctlCall(t *testing.T) {
	c := countingPrctl{force: -1}
	p, support := newPrctl(DefaultOption, "../testdata/proc/patched", c.fn)
	if !support.Supported {
		t.Fatalf("fixture kernel not supported: %s", support.Reason)
	}
	type result struct {
		Value int
		Errno string
	}
	call := func(cmd, pid, nid int, ptr UserPointer) result {
		v, err := p.Call(cmd, pid, nid, ptr)
		r := result{Value: v}
		if err != nil {
			r.Errno = err.Error()
		}
		return r
	}
	got := []result{
		call(CmdGet, 0, 0, PointerValid),
		call(CmdSet, 0, 1, PointerNil),
		call(CmdGet, 0, 0, PointerValid),
		call(CmdGet, 0, 0, PointerMisaligned),
		call(CmdGet, 0, 0, PointerNil),
		call(2, 0, 0, PointerValid),
		call(CmdSet, 0, -1, PointerNil),
		call(CmdGet, 0, 0, PointerValid),
	}
	want := []result{
		{Value: -1}, {Value: PointerSentinel}, {Value: 1},
		{Value: PointerSentinel, Errno: unix.EINVAL.Error()}, {Value: PointerSentinel, Errno: unix.EFAULT.Error()},
		{Value: PointerSentinel, Errno: unix.ERANGE.Error()}, {Value: PointerSentinel}, {Value: -1},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if _, err := p.Call(CmdGet, 0, 0, UserPointer(9)); err == nil {
		t.Error("an unknown pointer model was accepted")
	}

	// The typed interface wraps the errno.
	c.errno = unix.ESRCH
	if _, err := p.Get(12345); !errors.Is(err, unix.ESRCH) {
		t.Errorf("Get: %v, want ESRCH", err)
	}
	c.errno = unix.EPERM
	if err := p.Set(1, 0); !errors.Is(err, unix.EPERM) {
		t.Errorf("Set: %v, want EPERM", err)
	}
	if s, err := p.SchedNUMA(999999999); err == nil {
		t.Errorf("SchedNUMA of a missing task = %+v", s)
	}
}

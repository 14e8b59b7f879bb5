// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package prctl

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"unsafe"

	"github.com/numapref/numapref/internal/numa"
)

// prctlFunc issues prctl(option, cmd, pid, nid, addr) and returns the errno, or nil.
// Tests replace it to count calls.
type prctlFunc func(option int, cmd, pid, nid uintptr, addr unsafe.Pointer) error

// Prctl is the kernel backend: prctl(PR_PREFERRED_NID, ...). It issues no call with its
// option until the kernel proved it has the patch; see New.
type Prctl struct {
	option   int
	procRoot string
	support  numa.Support
	prctl    prctlFunc
}

var _ Kernel = (*Prctl)(nil)
var _ Raw = (*Prctl)(nil)

// New returns the kernel backend for prctl option number option (DefaultOption unless
// configured), reading proofs from procRoot (normally "/proc").
//
// Support must be proven before the option is used: mainline took the numbers near the
// patch's for other calls (MainlineOption). On Linux 6.16 and later option 78 is
// PR_FUTEX_HASH, and a SET there would resize the caller's futex hash; on Linux 7.0 option
// 79 is PR_RSEQ_SLICE_EXTENSION, where the SET's shape can return 0. The patched kernel
// prints a numa_preferred_nid_force line in /proc/<pid>/sched; without that line the
// backend is unsupported, issues no prctl at all, and every call returns ErrUnsupported.
// With it, one GET on the calling thread must agree with /proc/thread-self/sched, which
// catches a wrong option number.
func New(option int, procRoot string) (*Prctl, numa.Support) {
	return newPrctl(option, procRoot, rawPrctl)
}

func newPrctl(option int, procRoot string, fn prctlFunc) (*Prctl, numa.Support) {
	p := &Prctl{option: option, procRoot: procRoot, prctl: fn}
	p.support = p.prove()
	return p, p.support
}

func (p *Prctl) prove() numa.Support {
	s := numa.Support{Backend: "prctl", Option: p.option}
	if p.option <= 0 {
		s.Reason = fmt.Sprintf("invalid prctl option %d; no prctl was issued", p.option)
		return s
	}
	path := filepath.Join(p.procRoot, "self", "sched")
	data, err := os.ReadFile(path)
	if err != nil {
		s.Reason = fmt.Sprintf("cannot read %s, which proves support (needs CONFIG_SCHED_DEBUG): %v; no prctl was issued", path, err)
		return s
	}
	sched, err := numa.ParseSchedNUMA(string(data))
	switch {
	case err != nil:
		s.Reason = fmt.Sprintf("cannot parse %s: %v; no prctl was issued", path, err)
		return s
	case !sched.Present:
		s.Reason = fmt.Sprintf("%s has no NUMA lines: the kernel lacks CONFIG_NUMA_BALANCING; no prctl was issued", path)
		return s
	case !sched.ForcePresent:
		s.Reason = fmt.Sprintf("%s has no numa_preferred_nid_force line: the kernel lacks the PR_PREFERRED_NID patch; no prctl was issued", path)
		if other := MainlineOption(p.option); other != "" {
			s.Reason += fmt.Sprintf(" (option %d is %s)", p.option, other)
		}
		return s
	}

	// The patch is there. Check the option number with a GET of this thread's own value.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	own, err := readThreadSelfSched(p.procRoot)
	if err != nil {
		s.Reason = fmt.Sprintf("the kernel has the patch but this thread's sched is unreadable: %v; no prctl was issued", err)
		return s
	}
	got, err := p.call(CmdGet, 0, 0, PointerValid)
	if err != nil {
		s.Reason = fmt.Sprintf("the kernel has the patch but prctl(%d, GET) failed: %v: is %d the patch's option number?", p.option, err, p.option)
		return s
	}
	if got != own.PreferredNIDForce {
		s.Reason = fmt.Sprintf("prctl(%d, GET) returned %d but sched shows numa_preferred_nid_force %d: option %d is not PR_PREFERRED_NID on this kernel",
			p.option, got, own.PreferredNIDForce, p.option)
		return s
	}
	s.Supported = true
	s.Reason = fmt.Sprintf("%s shows numa_preferred_nid_force and prctl(%d, GET) agreed with it", path, p.option)
	return s
}

func readThreadSelfSched(procRoot string) (numa.SchedNUMA, error) {
	data, err := os.ReadFile(filepath.Join(procRoot, "thread-self", "sched"))
	if err != nil {
		return numa.SchedNUMA{}, err
	}
	return numa.ParseSchedNUMA(string(data))
}

// Support reports what New found.
func (p *Prctl) Support() numa.Support { return p.support }

// Get returns the forced preferred node of task tid (0: the calling thread).
func (p *Prctl) Get(tid int) (int, error) { return GetViaRaw(p, tid) }

// Set forces the preferred node of task tid (0: the calling thread); nid -1 clears it.
func (p *Prctl) Set(tid, nid int) error { return SetViaRaw(p, tid, nid) }

// Call issues prctl(option, cmd, pid, nid, ptr); see Raw. It returns ErrUnsupported,
// without any system call, unless the kernel proved support.
func (p *Prctl) Call(cmd, pid, nid int, ptr UserPointer) (int, error) {
	if !p.support.Supported {
		return PointerSentinel, ErrUnsupported
	}
	return p.call(cmd, pid, nid, ptr)
}

func (p *Prctl) call(cmd, pid, nid int, ptr UserPointer) (int, error) {
	// The int the kernel writes to lives on the heap (it escapes through p.prctl), so a
	// goroutine stack move cannot invalidate the address during the call.
	buf := new([2]int32)
	buf[0] = PointerSentinel
	var addr unsafe.Pointer
	switch ptr {
	case PointerValid:
		addr = unsafe.Pointer(&buf[0])
	case PointerMisaligned:
		addr = unsafe.Add(unsafe.Pointer(&buf[0]), 1)
	case PointerNil:
	default:
		return PointerSentinel, fmt.Errorf("invalid user pointer model %d", int(ptr))
	}
	err := p.prctl(p.option, uintptr(cmd), uintptr(pid), uintptr(nid), addr)
	runtime.KeepAlive(buf)
	v := PointerSentinel
	if ptr == PointerValid {
		v = int(buf[0])
	}
	return v, err
}

// SchedNUMA reads procRoot/<tid>/sched.
func (p *Prctl) SchedNUMA(tid int) (numa.SchedNUMA, error) {
	return numa.ReadSchedNUMA(p.procRoot, tid)
}

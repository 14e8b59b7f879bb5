// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package prctl

import (
	"errors"
	"fmt"

	"github.com/numapref/numapref/internal/numa"
)

// Kernel reads and sets tasks' forced preferred node. Errors wrap unix.Errno (unix.EPERM,
// unix.EINVAL ...) or ErrUnsupported; numa.IsTaskGone tells the one of a task that is gone
// (ESRCH) and numa.IsPermissionDenied a refusal (EPERM, EACCES).
type Kernel interface {
	numa.PreferredNodeReader
	Set(tid, nid int) error // nid -1 clears
}

// ErrUnsupported means the kernel has no PR_PREFERRED_NID: nothing was called.
var ErrUnsupported = errors.New("PR_PREFERRED_NID is not supported by this kernel")

// DefaultOption is PR_PREFERRED_NID as the posted patch (v1, v2) numbered it. v3 moved it
// to 79. Mainline took both numbers (see MainlineOption), so the number alone proves
// nothing; see New.
const DefaultOption = 78

// mainlineOptions are the prctl options near the patch's numbers that mainline Linux gave
// to other calls. The patch is not merged, so any number it ends up with may collide.
var mainlineOptions = map[int]string{
	78: "PR_FUTEX_HASH on Linux 6.16 and later",
	79: "PR_RSEQ_SLICE_EXTENSION on Linux 7.0 and later",
	80: "PR_GET_CFI on mainline Linux",
	81: "PR_SET_CFI on mainline Linux",
}

// MainlineOption says what mainline Linux calls prctl option option, when it is one of
// the numbers near the patch's that mainline took ("PR_FUTEX_HASH on Linux 6.16 and
// later"); "" for the others.
func MainlineOption(option int) string { return mainlineOptions[option] }

// The commands of PR_PREFERRED_NID (its second argument).
const (
	CmdGet = 0 // PR_PREFERRED_NID_GET: store the task's forced node at the fifth argument
	CmdSet = 1 // PR_PREFERRED_NID_SET: force the task's node to the fourth argument
)

// UserPointer models the fifth argument of prctl(PR_PREFERRED_NID, GET, ...): the user
// address the kernel stores the node id at. The kernel refuses a misaligned address with
// EINVAL and faults on NULL (EFAULT).
type UserPointer int

const (
	// PointerValid is the address of an aligned int in the caller's memory.
	PointerValid UserPointer = iota
	// PointerNil is address 0.
	PointerNil
	// PointerMisaligned is an address with (addr & 3) != 0.
	PointerMisaligned
)

func (p UserPointer) String() string {
	switch p {
	case PointerValid:
		return "valid"
	case PointerNil:
		return "nil"
	case PointerMisaligned:
		return "misaligned"
	}
	return fmt.Sprintf("UserPointer(%d)", int(p))
}

// PointerSentinel is what the int behind a PointerValid holds before the call. Raw.Call
// returns it when the call stored nothing.
const PointerSentinel = -0x5a5a5a5a

// Raw is the PR_PREFERRED_NID ABI argument for argument, for conformance tests that must
// express what the typed interface cannot (bad commands, bad pointers).
type Raw interface {
	// Call issues prctl(PR_PREFERRED_NID, cmd, pid, nid, ptr). cmd, pid and nid are passed
	// as the kernel receives them (unsigned long), so a negative cmd is a huge one and the
	// kernel truncates pid and nid to 32-bit ints. It returns the int left at ptr
	// (PointerSentinel if nothing was stored or ptr is not PointerValid) and the error,
	// which wraps a unix.Errno.
	Call(cmd, pid, nid int, ptr UserPointer) (int, error)
	// SchedNUMA reads the task's NUMA lines as /proc/<tid>/sched shows them (for the
	// emulator, its own view of the task).
	SchedNUMA(tid int) (numa.SchedNUMA, error)
	// Support describes the backend.
	Support() numa.Support
}

// GetViaRaw implements Kernel.Get on top of Raw: a GET with a valid pointer.
func GetViaRaw(r Raw, tid int) (int, error) {
	v, err := r.Call(CmdGet, tid, 0, PointerValid)
	if err != nil {
		return numa.NoNode, fmt.Errorf("getting preferred node of task %d: %w", tid, err)
	}
	return v, nil
}

// SetViaRaw implements Kernel.Set on top of Raw: a SET, whose pointer is unused.
func SetViaRaw(r Raw, tid, nid int) error {
	if _, err := r.Call(CmdSet, tid, nid, PointerNil); err != nil {
		return fmt.Errorf("setting preferred node of task %d to %d: %w", tid, nid, err)
	}
	return nil
}

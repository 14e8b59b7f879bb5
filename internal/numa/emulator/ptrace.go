// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package emulator

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// taskStatus holds the lines of /proc/<tid>/status that the ptrace access model needs.
type taskStatus struct {
	TGID int
	// UID and GID are the real, effective, saved and filesystem ids, in that order.
	UID, GID [4]uint32
	// CapPrm and CapEff are the permitted and effective capability sets.
	CapPrm, CapEff uint64
	// HasMM is false for kernel threads and zombies: tasks without an address space, whose
	// dumpability the kernel does not check. The kernel prints the Vm* lines only for a
	// task with an mm.
	HasMM bool
}

// capSysPtrace is CAP_SYS_PTRACE's bit number.
const capSysPtrace = 19

// parseStatus parses the text of /proc/<tid>/status.
func parseStatus(text string) (taskStatus, error) {
	var st taskStatus
	var seenTGID, seenUID, seenGID, seenPrm, seenEff bool
	for line := range strings.Lines(text) {
		key, value, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		value = strings.TrimSpace(value)
		var err error
		switch key {
		case "Tgid":
			seenTGID = true
			var v uint64
			if v, err = strconv.ParseUint(value, 10, 32); err == nil && v > 1<<31-1 {
				err = errors.New("tgid out of range")
			}
			st.TGID = int(v)
		case "Uid":
			seenUID = true
			st.UID, err = parseIDs(value)
		case "Gid":
			seenGID = true
			st.GID, err = parseIDs(value)
		case "CapPrm":
			seenPrm = true
			st.CapPrm, err = strconv.ParseUint(value, 16, 64)
		case "CapEff":
			seenEff = true
			st.CapEff, err = strconv.ParseUint(value, 16, 64)
		case "VmSize":
			st.HasMM = true
		}
		if err != nil {
			return taskStatus{}, fmt.Errorf("parsing status line %q: %w", strings.TrimSpace(line), err)
		}
	}
	if !seenTGID || !seenUID || !seenGID || !seenPrm || !seenEff {
		return taskStatus{}, errors.New("parsing status: missing Tgid, Uid, Gid, CapPrm or CapEff")
	}
	return st, nil
}

// parseIDs parses the four tab-separated ids of a Uid: or Gid: line.
func parseIDs(s string) ([4]uint32, error) {
	var ids [4]uint32
	fields := strings.Fields(s)
	if len(fields) != 4 {
		return ids, fmt.Errorf("%d ids, want 4", len(fields))
	}
	for i, f := range fields {
		v, err := strconv.ParseUint(f, 10, 32)
		if err != nil {
			return ids, err
		}
		ids[i] = uint32(v)
	}
	return ids, nil
}

// mayAccess models the kernel's ptrace_may_access(task, PTRACE_MODE_READ_REALCREDS),
// which PR_PREFERRED_NID checks for GET and SET alike. __ptrace_may_access
// (kernel/ptrace.c) and then the capability module's cap_ptrace_access_check
// (security/commoncap.c, always stacked) must both allow it:
//   - a task may always access its own thread group (no security module is asked);
//   - otherwise the caller's real uid must equal the target's real, effective and saved
//     uids, and its real gid the target's three gids, unless the caller has CAP_SYS_PTRACE
//     in its effective set (root without it is just another uid);
//   - a target that has an address space and is not dumpable needs CAP_SYS_PTRACE too;
//   - cap_ptrace_access_check: unless the caller has CAP_SYS_PTRACE in its effective set,
//     the target's permitted set must be a subset of the caller's permitted set (the
//     permitted set, not the effective one, because the mode is not FSCREDS). So root that
//     dropped CAP_SYS_PTRACE may not access another root process that still holds it (in
//     its permitted set), nor a kernel thread (full permitted set, no address space).
//
// Security modules other than the capability module are ignored (Yama restricts only
// ATTACH modes), and so are user namespaces: the capability is taken to cover the
// target's namespace, and caller and target to share one for the subset rule.
func mayAccess(caller, target taskStatus, targetDumpable bool) bool {
	if caller.TGID == target.TGID {
		return true
	}
	hasCap := caller.CapEff&(1<<capSysPtrace) != 0
	if hasCap {
		return true // every check below gives way to CAP_SYS_PTRACE
	}
	uid, gid := caller.UID[0], caller.GID[0]
	sameCreds := uid == target.UID[0] && uid == target.UID[1] && uid == target.UID[2] &&
		gid == target.GID[0] && gid == target.GID[1] && gid == target.GID[2]
	if !sameCreds {
		return false
	}
	if target.HasMM && !targetDumpable {
		return false
	}
	return target.CapPrm&^caller.CapPrm == 0 // cap_issubset(target permitted, caller permitted)
}

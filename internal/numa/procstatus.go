package numa

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
	// CapEff is the effective capability set.
	CapEff uint64
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
	var seenTGID, seenUID, seenGID, seenCap bool
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
		case "CapEff":
			seenCap = true
			st.CapEff, err = strconv.ParseUint(value, 16, 64)
		case "VmSize":
			st.HasMM = true
		}
		if err != nil {
			return taskStatus{}, fmt.Errorf("parsing status line %q: %w", strings.TrimSpace(line), err)
		}
	}
	if !seenTGID || !seenUID || !seenGID || !seenCap {
		return taskStatus{}, errors.New("parsing status: missing Tgid, Uid, Gid or CapEff")
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
// which PR_PREFERRED_NID checks for GET and SET alike:
//   - a task may always access its own thread group;
//   - otherwise the caller's real uid must equal the target's real, effective and saved
//     uids, and its real gid the target's three gids, unless the caller has CAP_SYS_PTRACE
//     in its effective set (root without it is just another uid);
//   - a target that is not dumpable needs CAP_SYS_PTRACE too.
//
// Security modules are ignored, and so are user namespaces: the capability is taken to
// cover the target's namespace.
func mayAccess(caller, target taskStatus, targetDumpable bool) bool {
	if caller.TGID == target.TGID {
		return true
	}
	hasCap := caller.CapEff&(1<<capSysPtrace) != 0
	uid, gid := caller.UID[0], caller.GID[0]
	sameCreds := uid == target.UID[0] && uid == target.UID[1] && uid == target.UID[2] &&
		gid == target.GID[0] && gid == target.GID[1] && gid == target.GID[2]
	if !sameCreds && !hasCap {
		return false
	}
	if target.HasMM && !targetDumpable && !hasCap {
		return false
	}
	return true
}

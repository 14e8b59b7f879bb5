// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package sandbox

import (
	"fmt"
	"strings"
)

// Options says what the sandbox keeps allowed beyond the agent's defaults.
type Options struct {
	// AllowKcmp keeps kcmp(2): the emulated kernel tells a CLONE_VM child from a fork()
	// child with kcmp(KCMP_VM). The real kernel's backend never calls it.
	AllowKcmp bool
	// AllowUnixSockets keeps socket(AF_UNIX): the NRI plugin dials the runtime's socket,
	// and dials it again when the runtime restarts. Without it no unix socket can be made,
	// so none of the host's (the runtime's own API, reachable through /proc/<pid>/root)
	// can be reached.
	AllowUnixSockets bool
	// AllowMovePages keeps move_pages(2): the agent moves containers' pages to their home
	// (page migration on). migrate_pages(2), which moves a whole process in one call, stays
	// refused.
	AllowMovePages bool
	// Landlock, when not nil, confines the process's files and network further where the
	// kernel offers Landlock. A Landlock domain also refuses ptrace access (and every
	// check of it: the preferred-node prctl, kcmp, /proc/<pid>/mem, /proc/<pid>/root) to
	// any process outside the domain, whatever the capabilities.
	Landlock *Landlock
}

// Landlock is what a process confined by Landlock may still reach; everything else on
// the filesystem (and, with TCP, every other TCP port) is refused with EACCES. Paths
// name files or directories, a directory's rule covering everything beneath it, through
// whichever path it is reached: /proc/1/root/<path> resolves to the host's own file,
// outside every rule.
type Landlock struct {
	// ReadOnly may be read, and listed when directories.
	ReadOnly []string
	// ReadWrite are directories in which files and directories may also be made,
	// written, truncated, renamed and removed.
	ReadWrite []string
	// RemoveDirs are directories in which an empty directory may be removed (the parent
	// of the state dir: a drained agent removes its own).
	RemoveDirs []string
	// UnixSockets are directories whose sockets may be connected to. Only Landlock ABI 9
	// and later confines unix sockets by path; before, any socket the process can make
	// may connect anywhere (see Options.AllowUnixSockets).
	UnixSockets []string
	// TCP confines TCP (Landlock ABI 4 and later) to binding BindTCP and connecting to
	// ConnectTCP (ports of any address).
	TCP                 bool
	BindTCP, ConnectTCP []uint16
}

// Status says what Install put in place, for the log and the node's report.
type Status struct {
	Seccomp  SeccompStatus
	Landlock LandlockStatus
}

// SeccompStatus describes the seccomp filter.
type SeccompStatus struct {
	// Arch is the architecture whose calls the filter knows (others kill the process).
	Arch string
	// PID is the process the signal and scheduling calls may still name.
	PID int
	// Denied names the calls refused whatever their arguments.
	Denied []string
	// Restricted names the calls allowed only with some arguments.
	Restricted []string
	// Instructions is the length of the BPF program.
	Instructions int
	// Checked names the calls tried right after the install, each refused with EPERM.
	Checked []string
}

// LandlockStatus describes the Landlock ruleset, or why there is none.
type LandlockStatus struct {
	// ABI is the kernel's Landlock ABI version; 0 when it offers none.
	ABI int
	// Applied says that every thread of the process is confined by the ruleset.
	Applied bool
	// Reason says why it is not, when it is not.
	Reason string
	// Confines names what the ruleset confines at this ABI: filesystem, unix socket
	// paths, tcp, abstract unix sockets.
	Confines []string
	// Missing names paths of the ruleset that did not exist, so have no rule.
	Missing []string
	// Checked names the calls tried right after the ruleset was enforced, each refused
	// with EACCES.
	Checked []string
}

// String is the status in one line, for a log message or a report's condition.
func (s LandlockStatus) String() string {
	if !s.Applied {
		if s.ABI == 0 {
			return "not applied: " + s.Reason
		}
		return fmt.Sprintf("not applied (Landlock ABI %d): %s", s.ABI, s.Reason)
	}
	return fmt.Sprintf("applied (Landlock ABI %d): %s", s.ABI, strings.Join(s.Confines, ", "))
}

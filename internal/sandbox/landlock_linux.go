// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build amd64 || arm64

package sandbox

import (
	"errors"
	"fmt"
	"runtime"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Landlock rights, by the ABI that brought them. A right the kernel's ABI does not know is
// neither handled nor granted: the ruleset confines what the kernel can confine.
const (
	fsABI1 = unix.LANDLOCK_ACCESS_FS_EXECUTE | unix.LANDLOCK_ACCESS_FS_WRITE_FILE | unix.LANDLOCK_ACCESS_FS_READ_FILE |
		unix.LANDLOCK_ACCESS_FS_READ_DIR | unix.LANDLOCK_ACCESS_FS_REMOVE_DIR | unix.LANDLOCK_ACCESS_FS_REMOVE_FILE |
		unix.LANDLOCK_ACCESS_FS_MAKE_CHAR | unix.LANDLOCK_ACCESS_FS_MAKE_DIR | unix.LANDLOCK_ACCESS_FS_MAKE_REG |
		unix.LANDLOCK_ACCESS_FS_MAKE_SOCK | unix.LANDLOCK_ACCESS_FS_MAKE_FIFO | unix.LANDLOCK_ACCESS_FS_MAKE_BLOCK |
		unix.LANDLOCK_ACCESS_FS_MAKE_SYM

	// fsRead reads files and lists directories.
	fsRead = unix.LANDLOCK_ACCESS_FS_READ_FILE | unix.LANDLOCK_ACCESS_FS_READ_DIR
	// fsWrite is what the state files need beneath their directory: atomic writes (a
	// temporary file, then a rename over the old one), removal, and subdirectories (the
	// emulated kernel's store). Never devices, FIFOs, sockets or symbolic links.
	fsWrite = unix.LANDLOCK_ACCESS_FS_WRITE_FILE | unix.LANDLOCK_ACCESS_FS_TRUNCATE | unix.LANDLOCK_ACCESS_FS_MAKE_REG |
		unix.LANDLOCK_ACCESS_FS_MAKE_DIR | unix.LANDLOCK_ACCESS_FS_REMOVE_FILE | unix.LANDLOCK_ACCESS_FS_REMOVE_DIR |
		unix.LANDLOCK_ACCESS_FS_REFER
	// fsFile are the rights a rule on a file (not a directory) may carry.
	fsFile = unix.LANDLOCK_ACCESS_FS_EXECUTE | unix.LANDLOCK_ACCESS_FS_WRITE_FILE | unix.LANDLOCK_ACCESS_FS_READ_FILE |
		unix.LANDLOCK_ACCESS_FS_TRUNCATE | unix.LANDLOCK_ACCESS_FS_IOCTL_DEV

	netTCP = unix.LANDLOCK_ACCESS_NET_BIND_TCP | unix.LANDLOCK_ACCESS_NET_CONNECT_TCP

	landlockRuleNetPort = 2 // LANDLOCK_RULE_NET_PORT
)

// handledFS are the filesystem rights the kernel of abi can confine: all of them.
func handledFS(abi int) uint64 {
	h := uint64(fsABI1)
	if abi >= 2 {
		h |= unix.LANDLOCK_ACCESS_FS_REFER
	}
	if abi >= 3 {
		h |= unix.LANDLOCK_ACCESS_FS_TRUNCATE
	}
	if abi >= 5 {
		h |= unix.LANDLOCK_ACCESS_FS_IOCTL_DEV
	}
	if abi >= 9 {
		h |= unix.LANDLOCK_ACCESS_FS_RESOLVE_UNIX
	}
	return h
}

// rulesetAttr is struct landlock_ruleset_attr up to its scoped field (ABI 6). A kernel of
// an older ABI reads less of it and requires the rest to be zero.
type rulesetAttr struct {
	handledFS, handledNet, scoped uint64
}

// pathBeneathAttr is struct landlock_path_beneath_attr, which the kernel packs: 12 bytes,
// the layout of these two fields.
type pathBeneathAttr struct {
	allowed uint64
	fd      int32
}

// netPortAttr is struct landlock_net_port_attr.
type netPortAttr struct {
	allowed, port uint64
}

// LandlockABI is the kernel's Landlock ABI version, 0 when it offers none.
func LandlockABI() int {
	abi, _, err := landlockVersion()
	if err != nil {
		return 0
	}
	return abi
}

func landlockVersion() (int, string, error) {
	r, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
	switch {
	case errno == unix.ENOSYS:
		return 0, "the kernel is built without Landlock (CONFIG_SECURITY_LANDLOCK)", errno
	case errno == unix.EOPNOTSUPP:
		return 0, "Landlock is not enabled at boot (lsm=)", errno
	case errno != 0:
		return 0, "asking the kernel's Landlock ABI", errno
	}
	return int(r), "", nil
}

// applyLandlock confines every thread of the process to l where the kernel offers
// Landlock. Without Landlock (or without a way to reach every thread) it confines nothing
// and says why, with no error: the seccomp filter still holds. An error means the kernel
// offers Landlock but the ruleset could not be made or applied.
func applyLandlock(l Landlock) (LandlockStatus, error) {
	abi, why, err := landlockVersion()
	st := LandlockStatus{ABI: abi}
	if err != nil {
		st.Reason = fmt.Sprintf("%s: %v", why, err)
		return st, nil
	}
	attr := rulesetAttr{handledFS: handledFS(abi)}
	st.Confines = append(st.Confines, "filesystem")
	if abi >= 9 {
		st.Confines = append(st.Confines, "unix socket paths")
	}
	if l.TCP && abi >= 4 {
		attr.handledNet = netTCP
		st.Confines = append(st.Confines, "tcp")
	}
	if abi >= 6 {
		attr.scoped = unix.LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET
		st.Confines = append(st.Confines, "abstract unix sockets")
	}
	fd, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, uintptr(unsafe.Pointer(&attr)), unsafe.Sizeof(attr), 0)
	if errno != 0 {
		return st, fmt.Errorf("sandbox: creating the Landlock ruleset (ABI %d): %w", abi, errno)
	}
	ruleset := int(fd)
	defer unix.Close(ruleset)
	if st.Missing, err = addRules(ruleset, l, attr); err != nil {
		return st, err
	}
	if reason, err := restrictAllThreads(ruleset, abi); err != nil || reason != "" {
		st.Reason = reason
		return st, err
	}
	st.Applied = true
	st.Checked, err = checkLandlock(l, attr.handledNet != 0)
	return st, err
}

// addRules adds l's rules to the ruleset, of the rights attr handles, and returns the
// paths that do not exist.
func addRules(ruleset int, l Landlock, attr rulesetAttr) (missing []string, err error) {
	for _, p := range []struct {
		paths  []string
		access uint64
	}{
		{l.ReadOnly, fsRead},
		{l.ReadWrite, fsRead | fsWrite},
		{l.RemoveDirs, unix.LANDLOCK_ACCESS_FS_REMOVE_DIR},
		{l.UnixSockets, unix.LANDLOCK_ACCESS_FS_RESOLVE_UNIX},
	} {
		for _, path := range p.paths {
			added, err := addPathRule(ruleset, path, p.access&attr.handledFS)
			if err != nil {
				return missing, err
			}
			if !added {
				missing = append(missing, path)
			}
		}
	}
	if attr.handledNet == 0 {
		return missing, nil
	}
	for _, p := range []struct {
		ports  []uint16
		access uint64
	}{{l.BindTCP, unix.LANDLOCK_ACCESS_NET_BIND_TCP}, {l.ConnectTCP, unix.LANDLOCK_ACCESS_NET_CONNECT_TCP}} {
		for _, port := range p.ports {
			if err := addPortRule(ruleset, port, p.access); err != nil {
				return missing, err
			}
		}
	}
	return missing, nil
}

// addPathRule grants access beneath path (or to path, a file: only the file rights
// among access). A path that does not exist is no rule, and false.
func addPathRule(ruleset int, path string, access uint64) (bool, error) {
	if access == 0 {
		return true, nil // a right this kernel does not confine needs no rule
	}
	fd, err := unix.Open(path, unix.O_PATH|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("sandbox: opening %s for its Landlock rule: %w", path, err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return false, fmt.Errorf("sandbox: %s: %w", path, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		if access &= fsFile; access == 0 {
			return true, nil
		}
	}
	attr := pathBeneathAttr{allowed: access, fd: int32(fd)}
	_, _, errno := unix.Syscall6(unix.SYS_LANDLOCK_ADD_RULE, uintptr(ruleset), unix.LANDLOCK_RULE_PATH_BENEATH, uintptr(unsafe.Pointer(&attr)), 0, 0, 0)
	if errno != 0 {
		return false, fmt.Errorf("sandbox: the Landlock rule for %s: %w", path, errno)
	}
	return true, nil
}

func addPortRule(ruleset int, port uint16, access uint64) error {
	attr := netPortAttr{allowed: access, port: uint64(port)}
	_, _, errno := unix.Syscall6(unix.SYS_LANDLOCK_ADD_RULE, uintptr(ruleset), landlockRuleNetPort, uintptr(unsafe.Pointer(&attr)), 0, 0, 0)
	if errno != 0 {
		return fmt.Errorf("sandbox: the Landlock rule for TCP port %d: %w", port, errno)
	}
	return nil
}

// restrictAllThreads enforces the ruleset on every thread: a Landlock domain belongs to a
// thread, and the Go runtime has started several. From ABI 8 the kernel does it
// (LANDLOCK_RESTRICT_SELF_TSYNC); before, each thread makes the call itself
// (syscall.AllThreadsSyscall), which the Go runtime offers only to binaries without cgo.
// Each thread needs no_new_privs first. A non-empty reason, with no error, says why
// nothing was enforced.
func restrictAllThreads(ruleset, abi int) (string, error) {
	_, _, errno := syscall.AllThreadsSyscall(unix.SYS_PRCTL, unix.PR_SET_NO_NEW_PRIVS, 1, 0)
	allThreads := errno == 0
	if errno != 0 && errno != unix.ENOTSUP {
		return "", fmt.Errorf("sandbox: setting no_new_privs on every thread: %w", errno)
	}
	if abi >= 8 {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if !allThreads {
			if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
				return "", fmt.Errorf("sandbox: setting no_new_privs: %w", err)
			}
		}
		_, _, errno = unix.Syscall(unix.SYS_LANDLOCK_RESTRICT_SELF, uintptr(ruleset), unix.LANDLOCK_RESTRICT_SELF_TSYNC, 0)
		if errno != 0 {
			return "", fmt.Errorf("sandbox: enforcing the Landlock ruleset on every thread: %w", errno)
		}
		return "", nil
	}
	if !allThreads {
		return fmt.Sprintf("Landlock ABI %d enforces a ruleset one thread at a time, and this binary is built with cgo, "+
			"where the Go runtime cannot make a call on every thread (build with CGO_ENABLED=0, as the image is)", abi), nil
	}
	if _, _, errno := syscall.AllThreadsSyscall(unix.SYS_LANDLOCK_RESTRICT_SELF, uintptr(ruleset), 0, 0); errno != 0 {
		return "", fmt.Errorf("sandbox: enforcing the Landlock ruleset on every thread: %w", errno)
	}
	return "", nil
}

// checkLandlock makes calls the ruleset must refuse, each harmless if it did not.
func checkLandlock(l Landlock, tcp bool) ([]string, error) {
	var checked []string
	if !covers(l, "/") {
		fd, err := unix.Open("/", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err == nil {
			unix.Close(fd)
		}
		if !errors.Is(err, unix.EACCES) {
			return checked, fmt.Errorf("sandbox: the Landlock ruleset is enforced but listing / returned %v, not EACCES", err)
		}
		checked = append(checked, "list /")
	}
	if tcp {
		// Port 0 (an ephemeral port) has no rule: the bind must be refused.
		err := bindTCP(0)
		if !errors.Is(err, unix.EACCES) {
			return checked, fmt.Errorf("sandbox: the Landlock ruleset is enforced but bind(127.0.0.1:0) returned %v, not EACCES", err)
		}
		checked = append(checked, "bind(127.0.0.1:0)")
	}
	return checked, nil
}

func covers(l Landlock, path string) bool {
	for _, paths := range [][]string{l.ReadOnly, l.ReadWrite, l.RemoveDirs, l.UnixSockets} {
		for _, p := range paths {
			if p == path {
				return true
			}
		}
	}
	return false
}

// bindTCP binds a new TCP socket to 127.0.0.1:port and closes it.
func bindTCP(port int) error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return unix.Bind(fd, &unix.SockaddrInet4{Port: port, Addr: [4]byte{127, 0, 0, 1}})
}

// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build amd64 || arm64

package sandbox

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// ruleKind says what a rule does with its call.
type ruleKind int

const (
	// deny refuses the call whatever its arguments.
	deny ruleKind = iota
	// allowSelf allows the call only when its first argument names the agent's process.
	allowSelf
	// allowSelfOrZero is allowSelf that also takes 0, which means "the caller".
	allowSelfOrZero
	// denyArg refuses the call when its argument arg (its low 32 bits) is one of values.
	denyArg
	// denyRanges refuses the call when its argument arg (its low 32 bits) lies in one of
	// ranges, bounds included.
	denyRanges
	// sockets allows socket(2) only for the families and types socketBlock names.
	sockets
	// denyBits refuses the call when its argument arg has any bit of mask set.
	denyBits
	// noSys answers ENOSYS, as a kernel without the call would, so that callers fall back
	// to an older call the filter can judge.
	noSys
)

// rule is what the filter does with one call.
type rule struct {
	name   string
	nr     uint32
	kind   ruleKind
	arg    int         // denyArg, denyRanges: the argument compared
	values []uint32    // denyArg: the values refused
	ranges [][2]uint32 // denyRanges: the ranges refused
	mask   uint32      // denyBits: the bits refused
	unix   bool        // sockets: AF_UNIX is allowed too
}

// Values the filter refuses as the command of fcntl and ioctl: each makes the kernel
// send SIGIO (or another signal) to the process it names, which can be anyone's.
const (
	fioSetOwn = 0x8901 // FIOSETOWN
	siocSPgrp = 0x8902 // SIOCSPGRP
)

// socketIoctls are the ioctl commands of sockets and network devices: 0x89xx (SIOC*:
// interfaces, routes, ARP, bridges, bonds, ethtool, FIOSETOWN and SIOCSPGRP) and 0x8bxx
// (wireless). With CAP_NET_ADMIN in the host network namespace they reconfigure the
// node's network; the agent makes none of them.
var socketIoctls = [][2]uint32{{0x8900, 0x89ff}, {0x8b00, 0x8bff}}

// cloneNamespaces are clone(2)'s flags that make new namespaces, as unshare(2) does:
// mount, cgroup, UTS, IPC, user, pid and network. A new user namespace would give code in
// the agent every capability there, and the kernel interfaces that opens.
const cloneNamespaces = unix.CLONE_NEWNS | unix.CLONE_NEWCGROUP | unix.CLONE_NEWUTS | unix.CLONE_NEWIPC |
	unix.CLONE_NEWUSER | unix.CLONE_NEWPID | unix.CLONE_NEWNET

// rules is the filter's table. What each group stands for is in SECURITY.md.
func rules(opts Options) []rule {
	r := []rule{
		// Another task's memory, registers and descriptors.
		{name: "ptrace", nr: unix.SYS_PTRACE},
		{name: "process_vm_readv", nr: unix.SYS_PROCESS_VM_READV},
		{name: "process_vm_writev", nr: unix.SYS_PROCESS_VM_WRITEV},
		{name: "pidfd_getfd", nr: unix.SYS_PIDFD_GETFD},
		{name: "process_madvise", nr: unix.SYS_PROCESS_MADVISE},
		{name: "process_mrelease", nr: unix.SYS_PROCESS_MRELEASE},
		{name: "get_robust_list", nr: unix.SYS_GET_ROBUST_LIST},
		{name: "perf_event_open", nr: unix.SYS_PERF_EVENT_OPEN},
		// Signals: only to the agent itself.
		{name: "kill", nr: unix.SYS_KILL, kind: allowSelf},
		{name: "tkill", nr: unix.SYS_TKILL, kind: allowSelf},
		{name: "tgkill", nr: unix.SYS_TGKILL, kind: allowSelf},
		{name: "rt_sigqueueinfo", nr: unix.SYS_RT_SIGQUEUEINFO, kind: allowSelf},
		{name: "rt_tgsigqueueinfo", nr: unix.SYS_RT_TGSIGQUEUEINFO, kind: allowSelf},
		{name: "pidfd_send_signal", nr: unix.SYS_PIDFD_SEND_SIGNAL},
		{name: "fcntl", nr: unix.SYS_FCNTL, kind: denyArg, arg: 1, values: []uint32{unix.F_SETOWN, unix.F_SETOWN_EX}},
		{name: "ioctl", nr: unix.SYS_IOCTL, kind: denyRanges, arg: 1, ranges: socketIoctls},
		// New programs: code running in the agent gets no shell, no binary of the host.
		{name: "execve", nr: unix.SYS_EXECVE},
		{name: "execveat", nr: unix.SYS_EXECVEAT},
		// Sockets: the API and its servers (inet), the proc connector (netlink), and the
		// runtime's NRI socket (unix) only when the plugin is on. Not route, firewall or
		// any other netlink family, which CAP_NET_ADMIN opens on the host's network, nor
		// packet, raw or any other family.
		{name: "socket", nr: unix.SYS_SOCKET, kind: sockets, unix: opts.AllowUnixSockets},
		// Another task's scheduling, placement and limits.
		{name: "sched_setaffinity", nr: unix.SYS_SCHED_SETAFFINITY, kind: allowSelfOrZero},
		{name: "sched_setscheduler", nr: unix.SYS_SCHED_SETSCHEDULER, kind: allowSelfOrZero},
		{name: "sched_setparam", nr: unix.SYS_SCHED_SETPARAM, kind: allowSelfOrZero},
		{name: "sched_setattr", nr: unix.SYS_SCHED_SETATTR, kind: allowSelfOrZero},
		{name: "prlimit64", nr: unix.SYS_PRLIMIT64, kind: allowSelfOrZero},
		{name: "setpriority", nr: unix.SYS_SETPRIORITY},
		{name: "ioprio_set", nr: unix.SYS_IOPRIO_SET},
		{name: "migrate_pages", nr: unix.SYS_MIGRATE_PAGES},
	}
	if !opts.AllowMovePages {
		r = append(r, rule{name: "move_pages", nr: unix.SYS_MOVE_PAGES})
	}
	if !opts.AllowKcmp {
		r = append(r, rule{name: "kcmp", nr: unix.SYS_KCMP})
	}
	return append(r, kernelRules...)
}

// kernelRules refuse what changes the kernel or the host, or reaches the kernel's
// riskiest interfaces; the agent needs none of it once started.
var kernelRules = []rule{
	{name: "init_module", nr: unix.SYS_INIT_MODULE},
	{name: "finit_module", nr: unix.SYS_FINIT_MODULE},
	{name: "delete_module", nr: unix.SYS_DELETE_MODULE},
	{name: "kexec_load", nr: unix.SYS_KEXEC_LOAD},
	{name: "kexec_file_load", nr: unix.SYS_KEXEC_FILE_LOAD},
	{name: "reboot", nr: unix.SYS_REBOOT},
	{name: "swapon", nr: unix.SYS_SWAPON},
	{name: "swapoff", nr: unix.SYS_SWAPOFF},
	{name: "mount", nr: unix.SYS_MOUNT},
	{name: "umount2", nr: unix.SYS_UMOUNT2},
	{name: "pivot_root", nr: unix.SYS_PIVOT_ROOT},
	{name: "open_tree", nr: unix.SYS_OPEN_TREE},
	{name: "move_mount", nr: unix.SYS_MOVE_MOUNT},
	{name: "fsopen", nr: unix.SYS_FSOPEN},
	{name: "fsconfig", nr: unix.SYS_FSCONFIG},
	{name: "fsmount", nr: unix.SYS_FSMOUNT},
	{name: "fspick", nr: unix.SYS_FSPICK},
	{name: "mount_setattr", nr: unix.SYS_MOUNT_SETATTR},
	{name: "setns", nr: unix.SYS_SETNS},
	{name: "unshare", nr: unix.SYS_UNSHARE},
	// clone makes the Go runtime's threads (no namespace flag). clone3 takes its flags in
	// a struct the filter cannot read: it answers ENOSYS, so that glibc's pthread_create
	// (a cgo build's threads) and Go's os/exec fall back to clone.
	{name: "clone", nr: unix.SYS_CLONE, kind: denyBits, arg: 0, mask: cloneNamespaces},
	{name: "clone3", nr: unix.SYS_CLONE3, kind: noSys},
	{name: "bpf", nr: unix.SYS_BPF},
	{name: "keyctl", nr: unix.SYS_KEYCTL},
	{name: "add_key", nr: unix.SYS_ADD_KEY},
	{name: "request_key", nr: unix.SYS_REQUEST_KEY},
	{name: "open_by_handle_at", nr: unix.SYS_OPEN_BY_HANDLE_AT},
	{name: "userfaultfd", nr: unix.SYS_USERFAULTFD},
	{name: "io_uring_setup", nr: unix.SYS_IO_URING_SETUP},
	{name: "io_uring_enter", nr: unix.SYS_IO_URING_ENTER},
	{name: "io_uring_register", nr: unix.SYS_IO_URING_REGISTER},
}

// Offsets in struct seccomp_data: int nr; __u32 arch; __u64 instruction_pointer;
// __u64 args[6]. Both architectures are little-endian: an argument's low 32 bits come
// first, and they are all the kernel reads of an int or unsigned int argument.
const (
	offNR   = 0
	offArch = 4
	offArgs = 16
)

const (
	retAllow uint32 = unix.SECCOMP_RET_ALLOW
	retDeny         = unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)
	retNoSys        = unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS)
	retKill  uint32 = unix.SECCOMP_RET_KILL_PROCESS
)

func stmt(code uint16, k uint32) unix.SockFilter { return unix.SockFilter{Code: code, K: k} }

func jump(code uint16, k uint32, jt, jf uint8) unix.SockFilter {
	return unix.SockFilter{Code: code, Jt: jt, Jf: jf, K: k}
}

const (
	ldAbs = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
	jeq   = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
	jge   = unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K
	jgt   = unix.BPF_JMP | unix.BPF_JGT | unix.BPF_K
	jset  = unix.BPF_JMP | unix.BPF_JSET | unix.BPF_K
	andK  = unix.BPF_ALU | unix.BPF_AND | unix.BPF_K
	ret   = unix.BPF_RET | unix.BPF_K
)

// assemble turns the rules into a BPF program for a process whose pid is self. Every
// jump is local to its rule's block, so no offset nears the 255 a jump can hold.
func assemble(rs []rule, self uint32) ([]unix.SockFilter, error) {
	prog := []unix.SockFilter{
		stmt(ldAbs, offArch),
		jump(jeq, auditArch, 1, 0),
		stmt(ret, retKill),
		stmt(ldAbs, offNR),
	}
	if x32Bit != 0 {
		prog = append(prog, jump(jge, x32Bit, 0, 1), stmt(ret, retDeny))
	}
	seen := map[uint32]string{}
	for _, r := range rs {
		if other, ok := seen[r.nr]; ok {
			return nil, fmt.Errorf("sandbox: %s and %s are the same call (%d)", other, r.name, r.nr)
		}
		seen[r.nr] = r.name
		block, err := r.block(self)
		if err != nil {
			return nil, err
		}
		prog = append(prog, block...)
	}
	prog = append(prog, stmt(ret, retAllow))
	if len(prog) > unix.BPF_MAXINSNS {
		return nil, fmt.Errorf("sandbox: the filter has %d instructions, more than the kernel's %d", len(prog), unix.BPF_MAXINSNS)
	}
	return prog, nil
}

// block is the rule's code. It starts with the call number in the accumulator; a call it
// does not match falls through to the next block with the accumulator unchanged.
func (r rule) block(self uint32) ([]unix.SockFilter, error) {
	switch r.kind {
	case deny:
		return []unix.SockFilter{jump(jeq, r.nr, 0, 1), stmt(ret, retDeny)}, nil
	case noSys:
		return []unix.SockFilter{jump(jeq, r.nr, 0, 1), stmt(ret, retNoSys)}, nil
	case denyRanges:
		return r.rangesBlock()
	case sockets:
		return r.socketBlock()
	case denyBits:
		if r.arg < 0 || r.arg > 5 || r.mask == 0 {
			return nil, fmt.Errorf("sandbox: rule %s: argument %d with mask %#x", r.name, r.arg, r.mask)
		}
		body := []unix.SockFilter{
			stmt(ldAbs, uint32(offArgs+8*r.arg)),
			jump(jset, r.mask, 1, 0),
			stmt(ret, retAllow),
			stmt(ret, retDeny),
		}
		return append([]unix.SockFilter{jump(jeq, r.nr, 0, uint8(len(body)))}, body...), nil
	}
	arg, values, onMatch, otherwise := 0, []uint32{self}, retAllow, retDeny
	switch r.kind {
	case allowSelf:
	case allowSelfOrZero:
		values = append(values, 0)
	case denyArg:
		arg, values, onMatch, otherwise = r.arg, r.values, retDeny, retAllow
	default:
		return nil, fmt.Errorf("sandbox: rule %s has an unknown kind %d", r.name, r.kind)
	}
	if arg < 0 || arg > 5 || len(values) == 0 || len(values) > 16 {
		return nil, fmt.Errorf("sandbox: rule %s: argument %d with %d values", r.name, arg, len(values))
	}
	// Body: load the argument, one comparison per value (a match jumps to the last
	// instruction), then the result for no match and the one for a match.
	n := len(values)
	body := []unix.SockFilter{stmt(ldAbs, uint32(offArgs+8*arg))}
	for i, v := range values {
		body = append(body, jump(jeq, v, uint8(n-i), 0))
	}
	body = append(body, stmt(ret, otherwise), stmt(ret, onMatch))
	return append([]unix.SockFilter{jump(jeq, r.nr, 0, uint8(len(body)))}, body...), nil
}

// rangesBlock refuses the call when its argument falls in one of r.ranges.
func (r rule) rangesBlock() ([]unix.SockFilter, error) {
	if r.arg < 0 || r.arg > 5 || len(r.ranges) == 0 || len(r.ranges) > 16 {
		return nil, fmt.Errorf("sandbox: rule %s: argument %d with %d ranges", r.name, r.arg, len(r.ranges))
	}
	code := []insn{
		{ins: jump(jeq, r.nr, 0, 0), jf: labelEnd},
		{ins: stmt(ldAbs, uint32(offArgs+8*r.arg))},
	}
	for i, rg := range r.ranges {
		next := fmt.Sprintf("range%d", i+1)
		if i == len(r.ranges)-1 {
			next = "allow"
		}
		code = append(code,
			insn{label: fmt.Sprintf("range%d", i), ins: jump(jge, rg[0], 0, 0), jf: next},
			insn{ins: jump(jgt, rg[1], 0, 0), jt: next, jf: "deny"})
	}
	code = append(code, insn{label: "allow", ins: stmt(ret, retAllow)}, insn{label: "deny", ins: stmt(ret, retDeny)})
	return link(r.name, code)
}

// socketBlock allows socket(family, type, protocol) for AF_INET and AF_INET6 streams and
// datagrams, AF_NETLINK with NETLINK_CONNECTOR (the proc connector), and AF_UNIX when
// r.unix; it refuses everything else.
func (r rule) socketBlock() ([]unix.SockFilter, error) {
	code := []insn{
		{ins: jump(jeq, r.nr, 0, 0), jf: labelEnd},
		{ins: stmt(ldAbs, offArgs)}, // family
		{ins: jump(jeq, unix.AF_INET, 0, 0), jt: "type"},
		{ins: jump(jeq, unix.AF_INET6, 0, 0), jt: "type"},
		{ins: jump(jeq, unix.AF_NETLINK, 0, 0), jt: "netlink"},
	}
	if r.unix {
		code = append(code, insn{ins: jump(jeq, unix.AF_UNIX, 0, 0), jt: "allow"})
	}
	code = append(code,
		insn{ins: stmt(ret, retDeny)},
		// The type without SOCK_NONBLOCK and SOCK_CLOEXEC.
		insn{label: "type", ins: stmt(ldAbs, offArgs+8)},
		insn{ins: stmt(andK, 0xf)},
		insn{ins: jump(jeq, unix.SOCK_STREAM, 0, 0), jt: "allow"},
		insn{ins: jump(jeq, unix.SOCK_DGRAM, 0, 0), jt: "allow"},
		insn{ins: stmt(ret, retDeny)},
		insn{label: "netlink", ins: stmt(ldAbs, offArgs+16)}, // protocol
		insn{ins: jump(jeq, unix.NETLINK_CONNECTOR, 0, 0), jt: "allow"},
		insn{ins: stmt(ret, retDeny)},
		insn{label: "allow", ins: stmt(ret, retAllow)},
	)
	return link(r.name, code)
}

// insn is an instruction whose jumps name labels instead of offsets: "" is the next
// instruction, labelEnd the first one after the block.
type insn struct {
	label  string
	ins    unix.SockFilter
	jt, jf string
}

const labelEnd = "end"

// link resolves the labels of code into jump offsets.
func link(name string, code []insn) ([]unix.SockFilter, error) {
	at := map[string]int{labelEnd: len(code)}
	for i, c := range code {
		if c.label != "" {
			at[c.label] = i
		}
	}
	out := make([]unix.SockFilter, len(code))
	for i, c := range code {
		out[i] = c.ins
		for _, j := range []struct {
			label string
			off   *uint8
		}{{c.jt, &out[i].Jt}, {c.jf, &out[i].Jf}} {
			if j.label == "" {
				continue
			}
			to, ok := at[j.label]
			if !ok || to <= i || to-i-1 > 255 {
				return nil, fmt.Errorf("sandbox: rule %s: no jump from %d to %q", name, i, j.label)
			}
			*j.off = uint8(to - i - 1)
		}
	}
	return out, nil
}

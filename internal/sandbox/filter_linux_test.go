// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build amd64 || arm64

package sandbox

import (
	"encoding/binary"
	"testing"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

const testPID = 4242

// run executes the filter in x/net/bpf's interpreter, an implementation of classic BPF
// independent of this package, on a seccomp_data for the call nr of arch with args.
func run(t *testing.T, prog []unix.SockFilter, arch uint32, nr uint32, args ...uint64) uint32 {
	t.Helper()
	raw := make([]bpf.RawInstruction, len(prog))
	for i, ins := range prog {
		raw[i] = bpf.RawInstruction{Op: ins.Code, Jt: ins.Jt, Jf: ins.Jf, K: ins.K}
	}
	insns, ok := bpf.Disassemble(raw)
	if !ok {
		t.Fatal("the filter has an instruction x/net/bpf does not know")
	}
	vm, err := bpf.NewVM(insns)
	if err != nil {
		t.Fatalf("x/net/bpf refuses the filter: %v", err)
	}
	// The kernel loads seccomp_data's 32-bit words in native (little-endian) order, the
	// interpreter in network order: each word is written big-endian so both read the same.
	data := make([]byte, 64)
	binary.BigEndian.PutUint32(data[offNR:], nr)
	binary.BigEndian.PutUint32(data[offArch:], arch)
	for i, a := range args {
		binary.BigEndian.PutUint32(data[offArgs+8*i:], uint32(a))
		binary.BigEndian.PutUint32(data[offArgs+8*i+4:], uint32(a>>32))
	}
	got, err := vm.Run(data)
	if err != nil {
		t.Fatal(err)
	}
	return uint32(got)
}

func TestFilterDecisions(t *testing.T) {
	prog, err := assemble(rules(Options{}), testPID)
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		arch uint32
		nr   uint32
		args []uint64
		want uint32
	}{
		"getpid":                      {auditArch, unix.SYS_GETPID, nil, retAllow},
		"futex":                       {auditArch, unix.SYS_FUTEX, nil, retAllow},
		"prctl":                       {auditArch, unix.SYS_PRCTL, []uint64{78}, retAllow},
		"pidfd_open":                  {auditArch, unix.SYS_PIDFD_OPEN, []uint64{77}, retAllow},
		"ptrace":                      {auditArch, unix.SYS_PTRACE, []uint64{unix.PTRACE_ATTACH, 77}, retDeny},
		"ptrace on itself":            {auditArch, unix.SYS_PTRACE, []uint64{unix.PTRACE_PEEKDATA, testPID}, retDeny},
		"process_vm_writev":           {auditArch, unix.SYS_PROCESS_VM_WRITEV, []uint64{77}, retDeny},
		"pidfd_getfd":                 {auditArch, unix.SYS_PIDFD_GETFD, []uint64{3, 4, 0}, retDeny},
		"kcmp":                        {auditArch, unix.SYS_KCMP, []uint64{testPID, 77, 1}, retDeny},
		"kill itself":                 {auditArch, unix.SYS_KILL, []uint64{testPID, 9}, retAllow},
		"kill another":                {auditArch, unix.SYS_KILL, []uint64{77, 9}, retDeny},
		"kill its group":              {auditArch, unix.SYS_KILL, []uint64{0, 9}, retDeny},
		"kill everyone":               {auditArch, unix.SYS_KILL, []uint64{uint64(0xffffffff), 9}, retDeny},
		"kill itself, high bits set":  {auditArch, unix.SYS_KILL, []uint64{1<<32 | testPID, 9}, retAllow}, // the kernel reads an int
		"tgkill its own thread":       {auditArch, unix.SYS_TGKILL, []uint64{testPID, 4243, 23}, retAllow},
		"tgkill another's thread":     {auditArch, unix.SYS_TGKILL, []uint64{77, 78, 23}, retDeny},
		"tkill":                       {auditArch, unix.SYS_TKILL, []uint64{78, 9}, retDeny},
		"rt_sigqueueinfo another":     {auditArch, unix.SYS_RT_SIGQUEUEINFO, []uint64{77, 9}, retDeny},
		"rt_tgsigqueueinfo itself":    {auditArch, unix.SYS_RT_TGSIGQUEUEINFO, []uint64{testPID, 4243, 9}, retAllow},
		"pidfd_send_signal":           {auditArch, unix.SYS_PIDFD_SEND_SIGNAL, []uint64{3, 9}, retDeny},
		"fcntl F_SETOWN":              {auditArch, unix.SYS_FCNTL, []uint64{3, unix.F_SETOWN, 77}, retDeny},
		"fcntl F_SETOWN_EX":           {auditArch, unix.SYS_FCNTL, []uint64{3, unix.F_SETOWN_EX, 0}, retDeny},
		"fcntl F_GETFL":               {auditArch, unix.SYS_FCNTL, []uint64{3, unix.F_GETFL}, retAllow},
		"ioctl FIOSETOWN":             {auditArch, unix.SYS_IOCTL, []uint64{3, fioSetOwn}, retDeny},
		"ioctl SIOCSPGRP":             {auditArch, unix.SYS_IOCTL, []uint64{3, siocSPgrp}, retDeny},
		"ioctl TCGETS":                {auditArch, unix.SYS_IOCTL, []uint64{0, unix.TCGETS}, retAllow},
		"ioctl FIONREAD":              {auditArch, unix.SYS_IOCTL, []uint64{3, 0x541b /* FIONREAD */}, retAllow},
		"ioctl SIOCADDRT":             {auditArch, unix.SYS_IOCTL, []uint64{3, unix.SIOCADDRT}, retDeny},
		"ioctl SIOCSIFFLAGS":          {auditArch, unix.SYS_IOCTL, []uint64{3, unix.SIOCSIFFLAGS}, retDeny},
		"ioctl SIOCETHTOOL":           {auditArch, unix.SYS_IOCTL, []uint64{3, unix.SIOCETHTOOL}, retDeny},
		"ioctl SIOCDEVPRIVATE + 15":   {auditArch, unix.SYS_IOCTL, []uint64{3, 0x89ff}, retDeny},
		"ioctl SIOCSIWFREQ":           {auditArch, unix.SYS_IOCTL, []uint64{3, 0x8b04}, retDeny},
		"ioctl 0x8a00":                {auditArch, unix.SYS_IOCTL, []uint64{3, 0x8a00}, retAllow},
		"ioctl 0x8c00":                {auditArch, unix.SYS_IOCTL, []uint64{3, 0x8c00}, retAllow},
		"ioctl SIOCADDRT, high bits":  {auditArch, unix.SYS_IOCTL, []uint64{3, 1<<32 | unix.SIOCADDRT}, retDeny}, // the kernel reads an unsigned int
		"ioctl TUNSETIFF":             {auditArch, unix.SYS_IOCTL, []uint64{3, unix.TUNSETIFF}, retAllow},
		"clone a thread":              {auditArch, unix.SYS_CLONE, []uint64{unix.CLONE_VM | unix.CLONE_FS | unix.CLONE_FILES | unix.CLONE_SIGHAND | unix.CLONE_SYSVSEM | unix.CLONE_THREAD}, retAllow},
		"clone a process":             {auditArch, unix.SYS_CLONE, []uint64{uint64(unix.SIGCHLD)}, retAllow},
		"clone a user namespace":      {auditArch, unix.SYS_CLONE, []uint64{unix.CLONE_NEWUSER | uint64(unix.SIGCHLD)}, retDeny},
		"clone a network namespace":   {auditArch, unix.SYS_CLONE, []uint64{unix.CLONE_NEWNET}, retDeny},
		"clone a mount namespace":     {auditArch, unix.SYS_CLONE, []uint64{unix.CLONE_NEWNS}, retDeny},
		"clone3":                      {auditArch, unix.SYS_CLONE3, []uint64{0, 88}, retNoSys},
		"execve":                      {auditArch, unix.SYS_EXECVE, nil, retDeny},
		"execveat":                    {auditArch, unix.SYS_EXECVEAT, nil, retDeny},
		"socket tcp":                  {auditArch, unix.SYS_SOCKET, []uint64{unix.AF_INET, unix.SOCK_STREAM | unix.SOCK_CLOEXEC | unix.SOCK_NONBLOCK, 0}, retAllow},
		"socket udp6":                 {auditArch, unix.SYS_SOCKET, []uint64{unix.AF_INET6, unix.SOCK_DGRAM | unix.SOCK_CLOEXEC, unix.IPPROTO_UDP}, retAllow},
		"socket raw":                  {auditArch, unix.SYS_SOCKET, []uint64{unix.AF_INET, unix.SOCK_RAW, unix.IPPROTO_RAW}, retDeny},
		"socket SOCK_PACKET":          {auditArch, unix.SYS_SOCKET, []uint64{unix.AF_INET, unix.SOCK_PACKET, 0}, retDeny},
		"socket packet":               {auditArch, unix.SYS_SOCKET, []uint64{unix.AF_PACKET, unix.SOCK_RAW, 0}, retDeny},
		"socket pf_key":               {auditArch, unix.SYS_SOCKET, []uint64{unix.AF_KEY, unix.SOCK_RAW, 2}, retDeny},
		"socket proc connector":       {auditArch, unix.SYS_SOCKET, []uint64{unix.AF_NETLINK, unix.SOCK_DGRAM | unix.SOCK_CLOEXEC | unix.SOCK_NONBLOCK, unix.NETLINK_CONNECTOR}, retAllow},
		"socket netlink route":        {auditArch, unix.SYS_SOCKET, []uint64{unix.AF_NETLINK, unix.SOCK_RAW | unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE}, retDeny},
		"socket netlink netfilter":    {auditArch, unix.SYS_SOCKET, []uint64{unix.AF_NETLINK, unix.SOCK_RAW, unix.NETLINK_NETFILTER}, retDeny},
		"socket netlink xfrm":         {auditArch, unix.SYS_SOCKET, []uint64{unix.AF_NETLINK, unix.SOCK_RAW, unix.NETLINK_XFRM}, retDeny},
		"socket unix":                 {auditArch, unix.SYS_SOCKET, []uint64{unix.AF_UNIX, unix.SOCK_STREAM | unix.SOCK_CLOEXEC, 0}, retDeny},
		"socketpair unix":             {auditArch, unix.SYS_SOCKETPAIR, []uint64{unix.AF_UNIX, unix.SOCK_STREAM, 0}, retAllow},
		"sched_setaffinity itself":    {auditArch, unix.SYS_SCHED_SETAFFINITY, []uint64{0}, retAllow},
		"sched_setaffinity own pid":   {auditArch, unix.SYS_SCHED_SETAFFINITY, []uint64{testPID}, retAllow},
		"sched_setaffinity another":   {auditArch, unix.SYS_SCHED_SETAFFINITY, []uint64{77}, retDeny},
		"prlimit64 another":           {auditArch, unix.SYS_PRLIMIT64, []uint64{77}, retDeny},
		"mount":                       {auditArch, unix.SYS_MOUNT, nil, retDeny},
		"unshare":                     {auditArch, unix.SYS_UNSHARE, []uint64{unix.CLONE_NEWNS}, retDeny},
		"io_uring_setup":              {auditArch, unix.SYS_IO_URING_SETUP, nil, retDeny},
		"another architecture's call": {unix.AUDIT_ARCH_I386, unix.SYS_GETPID, nil, retKill},
	}
	if x32Bit != 0 {
		cases["x32 ptrace"] = struct {
			arch uint32
			nr   uint32
			args []uint64
			want uint32
		}{auditArch, x32Bit | 521, nil, retDeny}
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := run(t, prog, tc.arch, tc.nr, tc.args...); got != tc.want {
				t.Errorf("got %#x, want %#x", got, tc.want)
			}
		})
	}
}

// With the NRI plugin on, unix sockets are allowed; nothing else changes.
func TestFilterAllowsUnixSocketsForNRI(t *testing.T) {
	prog, err := assemble(rules(Options{AllowUnixSockets: true}), testPID)
	if err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		args []uint64
		want uint32
	}{
		"unix":          {[]uint64{unix.AF_UNIX, unix.SOCK_STREAM | unix.SOCK_CLOEXEC, 0}, retAllow},
		"tcp":           {[]uint64{unix.AF_INET, unix.SOCK_STREAM, 0}, retAllow},
		"netlink route": {[]uint64{unix.AF_NETLINK, unix.SOCK_RAW, unix.NETLINK_ROUTE}, retDeny},
		"packet":        {[]uint64{unix.AF_PACKET, unix.SOCK_RAW, 0}, retDeny},
	} {
		if got := run(t, prog, auditArch, unix.SYS_SOCKET, tc.args...); got != tc.want {
			t.Errorf("socket %s: got %#x, want %#x", name, got, tc.want)
		}
	}
}

// Every rule that denies outright denies, and the emulated kernel's option keeps kcmp.
func TestFilterDeniesEachRule(t *testing.T) {
	prog, err := assemble(rules(Options{}), testPID)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rules(Options{}) {
		if r.kind == deny && run(t, prog, auditArch, r.nr) != retDeny {
			t.Errorf("%s is not denied", r.name)
		}
	}
	kcmp, err := assemble(rules(Options{AllowKcmp: true}), testPID)
	if err != nil {
		t.Fatal(err)
	}
	if got := run(t, kcmp, auditArch, unix.SYS_KCMP, testPID, 77, 1); got != retAllow {
		t.Errorf("with AllowKcmp kcmp got %#x, want allowed", got)
	}
	if got := run(t, kcmp, auditArch, unix.SYS_PTRACE, unix.PTRACE_ATTACH, 77); got != retDeny {
		t.Errorf("with AllowKcmp ptrace got %#x, want denied", got)
	}
}

// move_pages is refused unless page migration is on; migrate_pages always is.
func TestFilterMovePagesOnlyWithMigration(t *testing.T) {
	for name, tc := range map[string]struct {
		opts               Options
		movePages, migrate uint32
	}{
		"migration off": {Options{}, retDeny, retDeny},
		"migration on":  {Options{AllowMovePages: true}, retAllow, retDeny},
	} {
		prog, err := assemble(rules(tc.opts), testPID)
		if err != nil {
			t.Fatal(err)
		}
		if got := run(t, prog, auditArch, unix.SYS_MOVE_PAGES, 77, 1); got != tc.movePages {
			t.Errorf("%s: move_pages got %#x, want %#x", name, got, tc.movePages)
		}
		if got := run(t, prog, auditArch, unix.SYS_MIGRATE_PAGES, 77, 1); got != tc.migrate {
			t.Errorf("%s: migrate_pages got %#x, want %#x", name, got, tc.migrate)
		}
	}
}

func TestAssembleRefusesTwoRulesForOneCall(t *testing.T) {
	_, err := assemble([]rule{{name: "ptrace", nr: unix.SYS_PTRACE}, {name: "ptrace again", nr: unix.SYS_PTRACE, kind: allowSelf}}, testPID)
	if err == nil {
		t.Error("two rules for ptrace assembled")
	}
}

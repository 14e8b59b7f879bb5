// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package emulator

import (
	"os"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// statusText is a /proc/<pid>/status as Linux 6.18 prints it, cut down, with the same
// permitted and effective capabilities.
func statusText(tgid int, uid, gid string, capEff string, hasMM bool) string {
	return statusTextCaps(tgid, uid, gid, capEff, capEff, hasMM)
}

// statusTextCaps is statusText with distinct permitted and effective capabilities.
func statusTextCaps(tgid int, uid, gid string, capPrm, capEff string, hasMM bool) string {
	s := "Name:\tsleep\nUmask:\t0022\nState:\tS (sleeping)\nTgid:\t" + strconv.Itoa(tgid) + "\nNgid:\t0\nPid:\t" + strconv.Itoa(tgid) +
		"\nPPid:\t1\nTracerPid:\t0\nUid:\t" + uid + "\nGid:\t" + gid + "\nFDSize:\t64\nGroups:\t \n"
	if hasMM {
		s += "VmPeak:\t    3060 kB\nVmSize:\t    3060 kB\n"
	}
	return s + "Threads:\t1\nCapInh:\t0000000000000000\nCapPrm:\t" + capPrm + "\nCapEff:\t" + capEff +
		"\nCapBnd:\t000001ffffffffff\nCapAmb:\t0000000000000000\n"
}

const (
	capsRoot = "000001fffeffffff" // this VM's root: everything but CAP_SYS_RESOURCE
	capsNone = "0000000000000000"
)

func TestParseStatus(t *testing.T) {
	tests := map[string]struct {
		in      string
		want    taskStatus
		wantErr bool
	}{
		"root": {
			in:   statusText(42, "0\t0\t0\t0", "0\t0\t0\t0", capsRoot, true),
			want: taskStatus{TGID: 42, CapPrm: 0x1fffeffffff, CapEff: 0x1fffeffffff, HasMM: true},
		},
		"user with a saved root uid": {
			in:   statusText(7, "1000\t1000\t0\t1000", "1000\t1000\t1000\t1000", capsNone, true),
			want: taskStatus{TGID: 7, UID: [4]uint32{1000, 1000, 0, 1000}, GID: [4]uint32{1000, 1000, 1000, 1000}, HasMM: true},
		},
		"kernel thread": {
			in:   statusText(2, "0\t0\t0\t0", "0\t0\t0\t0", capsRoot, false),
			want: taskStatus{TGID: 2, CapPrm: 0x1fffeffffff, CapEff: 0x1fffeffffff},
		},
		"permitted differs from effective": {
			in:   statusTextCaps(9, "0\t0\t0\t0", "0\t0\t0\t0", capsRoot, capsNone, true),
			want: taskStatus{TGID: 9, CapPrm: 0x1fffeffffff, HasMM: true},
		},
		"three uids":      {in: statusText(1, "0\t0\t0", "0\t0\t0\t0", capsRoot, true), wantErr: true},
		"uid not numeric": {in: statusText(1, "a\t0\t0\t0", "0\t0\t0\t0", capsRoot, true), wantErr: true},
		"caps not hex":    {in: statusText(1, "0\t0\t0\t0", "0\t0\t0\t0", "xyz", true), wantErr: true},
		"no Tgid":         {in: "Uid:\t0\t0\t0\t0\nGid:\t0\t0\t0\t0\nCapPrm:\t0\nCapEff:\t0\n", wantErr: true},
		"no CapPrm":       {in: "Tgid:\t1\nUid:\t0\t0\t0\t0\nGid:\t0\t0\t0\t0\nCapEff:\t0\n", wantErr: true},
		"empty":           {in: "", wantErr: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := parseStatus(tc.in)
			if (err != nil) != tc.wantErr {
				t.Fatalf("error %v, want error %v", err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseStatusSelf(t *testing.T) {
	data, err := os.ReadFile("/proc/thread-self/status")
	if err != nil {
		t.Fatal(err)
	}
	st, err := parseStatus(string(data))
	if err != nil {
		t.Fatal(err)
	}
	if st.TGID != os.Getpid() || st.UID[0] != uint32(os.Getuid()) || !st.HasMM {
		t.Errorf("this thread's status parsed as %+v", st)
	}
}

func TestMayAccess(t *testing.T) {
	const (
		ptrace  = 1 << capSysPtrace
		allCaps = 0x1ffffffffff
	)
	user := func(tgid int, uid uint32) taskStatus {
		return taskStatus{TGID: tgid, UID: [4]uint32{uid, uid, uid, uid}, GID: [4]uint32{uid, uid, uid, uid}, HasMM: true}
	}
	// root has the given capabilities, permitted and effective.
	root := func(tgid int, caps uint64) taskStatus {
		s := user(tgid, 0)
		s.CapPrm, s.CapEff = caps, caps
		return s
	}
	setuid := user(30, 1000)
	setuid.UID[2] = 0 // a saved root uid: not the caller's creds
	kthread := root(2, allCaps)
	kthread.HasMM = false
	ineffective := root(10, allCaps) // CAP_SYS_PTRACE permitted, not effective
	ineffective.CapEff &^= ptrace
	tests := map[string]struct {
		caller, target taskStatus
		dumpable       bool
		want           bool
	}{
		"own thread group, even without rights":    {caller: user(10, 1000), target: root(10, allCaps), dumpable: false, want: true},
		"same uid and gid":                         {caller: user(10, 1000), target: user(20, 1000), dumpable: true, want: true},
		"other uid":                                {caller: user(10, 1000), target: root(1, allCaps), dumpable: true, want: false},
		"other gid":                                {caller: user(10, 1000), target: func() taskStatus { s := user(20, 1000); s.GID[1] = 5; return s }(), dumpable: true, want: false},
		"saved uid differs":                        {caller: user(10, 1000), target: setuid, dumpable: true, want: false},
		"same uid, not dumpable":                   {caller: user(10, 1000), target: user(20, 1000), dumpable: false, want: false},
		"same uid, target holds more capabilities": {caller: user(10, 1000), target: func() taskStatus { s := user(20, 1000); s.CapPrm = 1; return s }(), dumpable: true, want: false},
		"root with CAP_SYS_PTRACE":                 {caller: root(10, ptrace), target: user(20, 1000), dumpable: true, want: true},
		"root with CAP_SYS_PTRACE, not dumpable":   {caller: root(10, ptrace), target: user(20, 1000), dumpable: false, want: true},
		"root with CAP_SYS_PTRACE, on full root":   {caller: root(10, ptrace), target: root(20, allCaps), dumpable: true, want: true},
		"root without CAP_SYS_PTRACE, other uid":   {caller: root(10, allCaps&^ptrace), target: user(20, 1000), dumpable: true, want: false},
		// cap_ptrace_access_check: the target's permitted set is not a subset.
		"root without CAP_SYS_PTRACE, root target holding it": {caller: root(10, allCaps&^ptrace), target: root(20, allCaps), dumpable: true, want: false},
		"root without CAP_SYS_PTRACE, root target without it": {caller: root(10, allCaps&^ptrace), target: root(20, allCaps&^ptrace), dumpable: true, want: true},
		"root without capabilities, root target without any":  {caller: root(10, 0), target: root(20, 0), dumpable: true, want: true},
		// The subset rule compares permitted sets (READ_REALCREDS is not FSCREDS).
		"root with CAP_SYS_PTRACE permitted only, root target":         {caller: ineffective, target: root(20, allCaps), dumpable: true, want: true},
		"root with CAP_SYS_PTRACE permitted only, uid 1000 target":     {caller: ineffective, target: user(20, 1000), dumpable: true, want: false},
		"target permitted set compared, not its effective set":         {caller: root(10, allCaps&^ptrace), target: func() taskStatus { s := root(20, allCaps); s.CapEff = 0; return s }(), dumpable: true, want: false},
		"uid 1000 on a kernel thread":                                  {caller: user(10, 1000), target: kthread, want: false},
		"root without the cap on a kernel thread (full permitted set)": {caller: root(10, allCaps&^ptrace), target: kthread, want: false},
		"root with the cap on a kernel thread":                         {caller: root(10, ptrace), target: kthread, want: true},
		"real uid counts, not effective": {
			caller: func() taskStatus { s := user(10, 1000); s.UID[1] = 0; return s }(), target: root(1, 0), dumpable: true, want: false,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := mayAccess(tc.caller, tc.target, tc.dumpable); got != tc.want {
				t.Errorf("mayAccess = %v, want %v", got, tc.want)
			}
		})
	}
}

func FuzzParseStatus(f *testing.F) {
	f.Add(statusText(42, "0\t0\t0\t0", "0\t0\t0\t0", capsRoot, true))
	f.Add("Tgid:\t1\nUid:\t0\t0\t0\t0\nGid:\t0\t0\t0\t0\nCapPrm:\tffffffffffffffff\nCapEff:\tffffffffffffffff\n")
	f.Add("Tgid:\t99999999999\n")
	f.Fuzz(func(t *testing.T, s string) {
		if st, err := parseStatus(s); err == nil && st.TGID < 0 {
			t.Errorf("negative tgid from %q", s)
		}
	})
}

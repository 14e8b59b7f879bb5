// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package numa

import (
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/net/bpf"
)

// ForkFilter says which fork events a proc connector socket lets through, so that the
// kernel drops the rest before they wake the reader: a fork passes when its creator is a
// process of TGIDs or was born after Above (a pid above it), that is its parent tgid for a
// new process, and also its own tgid for a new thread. The zero value passes every fork.
// Pids are compared as numbers: after the kernel's pids wrap around, a new process below
// Above passes only if it is in TGIDs, so a caller lowers Above when it sees a wrap.
type ForkFilter struct {
	Above int
	TGIDs []int
}

// All says whether every fork passes.
func (f ForkFilter) All() bool { return f.Above <= 0 }

// Equal says whether f and g pass the same forks.
func (f ForkFilter) Equal(g ForkFilter) bool {
	if f.All() || g.All() {
		return f.All() == g.All()
	}
	return f.Above == g.Above && slices.Equal(f.TGIDs, g.TGIDs)
}

// Covers says whether g passes every fork f passes (sorted TGIDs).
func (g ForkFilter) Covers(f ForkFilter) bool {
	switch {
	case g.All():
		return true
	case f.All() || g.Above > f.Above:
		return false
	}
	for _, t := range f.TGIDs {
		if _, found := slices.BinarySearch(g.TGIDs, t); !found && t <= g.Above {
			return false
		}
	}
	return true
}

// MaxFilterTGIDs bounds ForkFilter.TGIDs: a classic BPF program holds at most 4096
// instructions, and each process takes four.
const MaxFilterTGIDs = 900

// Offsets in a proc connector datagram (nlmsghdr, cn_msg, proc_event).
const (
	offWhat       = nlmsgHdrLen + cnMsgLen
	offData       = offWhat + procEventHdrLen
	offParentTGID = offData + 4
	offChildTID   = offData + 8
	offChildTGID  = offData + 12
)

const (
	bpfAccept = math.MaxUint32 // the whole datagram
	bpfDrop   = 0
)

// procFilter is the socket filter that passes the subscription's answer, the event kinds
// of kinds (all of them when empty) and, if kinds has forks, the forks of forks.
func procFilter(kinds []ProcEventKind, forks ForkFilter) ([]bpf.RawInstruction, error) {
	if len(forks.TGIDs) > MaxFilterTGIDs {
		return nil, fmt.Errorf("a fork filter of %d processes (at most %d)", len(forks.TGIDs), MaxFilterTGIDs)
	}
	var whats []uint32
	passForks := len(kinds) == 0
	for _, k := range kinds {
		switch k {
		case ProcEventFork:
			passForks = true
		case ProcEventExec:
			whats = append(whats, procEventWhatExec)
		case ProcEventExit:
			whats = append(whats, procEventWhatExit)
		case procEventComm:
			whats = append(whats, procEventWhatComm)
		default:
			return nil, fmt.Errorf("no filter for %v events", k)
		}
	}
	// A word loads in network order: compare the event kind with its bytes so loaded.
	asLoaded := func(what uint32) uint32 {
		return binary.BigEndian.Uint32(binary.NativeEndian.AppendUint32(nil, what))
	}
	prog := []bpf.Instruction{bpf.LoadAbsolute{Off: offWhat, Size: 4}}
	if len(kinds) == 0 {
		return bpf.Assemble(append(prog, bpf.RetConstant{Val: bpfAccept}))
	}
	for _, what := range append(whats, procEventWhatNone) {
		prog = append(prog, bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: asLoaded(what), SkipTrue: 1}, bpf.RetConstant{Val: bpfAccept})
	}
	if !passForks {
		return bpf.Assemble(append(prog, bpf.RetConstant{Val: bpfDrop}))
	}
	prog = append(prog, bpf.JumpIf{Cond: bpf.JumpEqual, Val: asLoaded(procEventWhatFork), SkipTrue: 1}, bpf.RetConstant{Val: bpfDrop})
	if forks.All() {
		return bpf.Assemble(append(prog, bpf.RetConstant{Val: bpfAccept}))
	}
	return bpf.Assemble(append(prog, forkChecks(forks)...))
}

// forkChecks is the program's part for one fork event: its parent tgid, then, for a new
// thread, its own tgid, against forks.
func forkChecks(forks ForkFilter) []bpf.Instruction {
	prog := append(loadPid(offParentTGID), creatorChecks(forks)...)
	prog = append(prog, loadPid(offChildTID)...)
	prog = append(prog, bpf.StoreScratch{Src: bpf.RegA, N: 0})
	prog = append(prog, loadPid(offChildTGID)...)
	// A is the tgid, X the tid: equal for a new process, whose own tgid is new and says
	// nothing.
	prog = append(prog, bpf.LoadScratch{Dst: bpf.RegX, N: 0},
		bpf.JumpIfX{Cond: bpf.JumpNotEqual, SkipTrue: 1}, bpf.RetConstant{Val: bpfDrop})
	prog = append(prog, creatorChecks(forks)...)
	return append(prog, bpf.RetConstant{Val: bpfDrop})
}

// creatorChecks accepts the datagram when A, a tgid, is above forks.Above or one of
// forks.TGIDs, and goes on past its end otherwise.
func creatorChecks(forks ForkFilter) []bpf.Instruction {
	prog := []bpf.Instruction{bpf.JumpIf{Cond: bpf.JumpLessOrEqual, Val: uint32(forks.Above), SkipTrue: 1}, bpf.RetConstant{Val: bpfAccept}}
	for _, tgid := range forks.TGIDs {
		prog = append(prog, bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: uint32(tgid), SkipTrue: 1}, bpf.RetConstant{Val: bpfAccept})
	}
	return prog
}

// loadPid loads the native-endian 32-bit pid at off into A (it uses X): a word load would
// read it in network order, and classic BPF cannot swap bytes.
func loadPid(off uint32) []bpf.Instruction {
	order := []uint32{3, 2, 1, 0} // most significant byte first
	if binary.NativeEndian.Uint16([]byte{0, 1}) == 1 {
		order = []uint32{0, 1, 2, 3} // big-endian
	}
	prog := []bpf.Instruction{bpf.LoadAbsolute{Off: off + order[0], Size: 1}}
	for _, i := range order[1:] {
		prog = append(prog,
			bpf.ALUOpConstant{Op: bpf.ALUOpShiftLeft, Val: 8},
			bpf.TAX{},
			bpf.LoadAbsolute{Off: off + i, Size: 1},
			bpf.ALUOpX{Op: bpf.ALUOpOr},
		)
	}
	return prog
}

// ReadLastPid reads the pid the kernel gave last, in the pid namespace of the reader of
// procRoot (procRoot/sys/kernel/ns_last_pid).
func ReadLastPid(procRoot string) (int, error) {
	data, err := os.ReadFile(filepath.Join(procRoot, "sys", "kernel", "ns_last_pid"))
	if err != nil {
		return 0, fmt.Errorf("reading the last pid: %w", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil {
		return 0, fmt.Errorf("reading the last pid: %w", err)
	}
	return pid, nil
}

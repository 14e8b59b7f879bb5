// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package numa

import (
	"testing"

	"golang.org/x/net/bpf"
)

// The socket filter runs through x/net/bpf's interpreter on crafted datagrams: the agent's
// (forks only, of the processes it watches or born after its mark) and the emulator's
// (every kind it reads) pass what they act on and drop the rest.
func TestProcFilter(t *testing.T) {
	agent := []ProcEventKind{ProcEventFork}
	watched := ForkFilter{Above: 5000, TGIDs: []int{300, 4242, 70000}}
	emulator := []ProcEventKind{ProcEventFork, ProcEventExec, ProcEventExit, procEventComm}
	forkOf := func(parentTGID, childTID, childTGID int32) []byte {
		return procMessage(procEventWhatFork, 0, 1, parentTGID, parentTGID, childTID, childTGID)
	}
	tests := map[string]struct {
		kinds []ProcEventKind
		forks ForkFilter
		in    []byte
		pass  bool
	}{
		"agent: a watched process forks":               {agent, watched, forkOf(4242, 6000, 6000), true},
		"agent: a process born after the mark forks":   {agent, watched, forkOf(5001, 6001, 6001), true},
		"agent: an old unwatched process forks":        {agent, watched, forkOf(4000, 6002, 6002), false},
		"agent: the mark itself is old":                {agent, watched, forkOf(5000, 6003, 6003), false},
		"agent: a watched process starts a thread":     {agent, watched, forkOf(1, 4250, 4242), true},
		"agent: a young process starts a thread":       {agent, watched, forkOf(1, 6101, 6100), true},
		"agent: an old process starts a thread":        {agent, watched, forkOf(1, 4001, 4000), false},
		"agent: a new process reusing a watched pid":   {agent, watched, forkOf(1, 300, 300), false},
		"agent: a watched pid past 16 bits forks":      {agent, watched, forkOf(70000, 80000, 80000), true},
		"agent: a thread of a watched parent's child":  {agent, watched, forkOf(300, 4001, 4000), true},
		"agent: exit of a watched process":             {agent, watched, procMessage(procEventWhatExit, 0, 1, 4242, 4242, 0, 17, 1, 1), false},
		"agent: exec of a young process":               {agent, watched, procMessage(procEventWhatExec, 0, 1, 6000, 6000), false},
		"agent: comm":                                  {agent, watched, procMessage(procEventWhatComm, 0, 1, 4242, 4242), false},
		"agent: uid change":                            {agent, watched, procMessage(0x4, 0, 1, 4242, 4242, 0, 0), false},
		"agent: the subscription's answer":             {agent, watched, procMessage(procEventWhatNone, 43, 1, 0), true},
		"agent, every fork: an old process forks":      {agent, ForkFilter{}, forkOf(4000, 6002, 6002), true},
		"agent, every fork: exit":                      {agent, ForkFilter{}, procMessage(procEventWhatExit, 0, 1, 4242, 4242, 0, 17, 1, 1), false},
		"emulator: exec":                               {emulator, ForkFilter{}, procMessage(procEventWhatExec, 0, 1, 6000, 6000), true},
		"emulator: exit":                               {emulator, ForkFilter{}, procMessage(procEventWhatExit, 0, 1, 7, 7, 0, 17, 1, 1), true},
		"emulator: comm (its barrier)":                 {emulator, ForkFilter{}, procMessage(procEventWhatComm, 0, 1, 7, 7), true},
		"emulator: fork":                               {emulator, ForkFilter{}, forkOf(4000, 6002, 6002), true},
		"emulator: uid change":                         {emulator, ForkFilter{}, procMessage(0x4, 0, 1, 7, 7, 0, 0), false},
		"every kind: uid change":                       {nil, ForkFilter{}, procMessage(0x4, 0, 1, 7, 7, 0, 0), true},
		"a datagram too short for its fork's pids":     {agent, watched, forkOf(4242, 6000, 6000)[:offParentTGID+2], false},
		"agent, no process watched: a young one forks": {agent, ForkFilter{Above: 5000}, forkOf(5001, 6001, 6001), true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			raw, err := procFilter(tc.kinds, tc.forks)
			if err != nil {
				t.Fatal(err)
			}
			prog, ok := bpf.Disassemble(raw)
			if !ok {
				t.Fatalf("the program does not disassemble: %v", prog)
			}
			vm, err := bpf.NewVM(prog)
			if err != nil {
				t.Fatal(err)
			}
			n, err := vm.Run(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if pass := n > 0; pass != tc.pass {
				t.Errorf("passed %d bytes of %d, want pass %v; program:\n%v", n, len(tc.in), tc.pass, prog)
			} else if pass && n < len(tc.in) {
				t.Errorf("passed %d bytes of %d, want all", n, len(tc.in))
			}
		})
	}
}

func TestProcFilterBounds(t *testing.T) {
	tgids := make([]int, MaxFilterTGIDs)
	for i := range tgids {
		tgids[i] = 1000 + i
	}
	raw, err := procFilter([]ProcEventKind{ProcEventFork}, ForkFilter{Above: 1 << 20, TGIDs: tgids})
	if err != nil {
		t.Fatal(err)
	}
	if len(raw) > 4096 {
		t.Errorf("%d instructions: the kernel takes at most 4096", len(raw))
	}
	if _, err := procFilter([]ProcEventKind{ProcEventFork}, ForkFilter{Above: 1, TGIDs: append(tgids, 1)}); err == nil {
		t.Error("a filter past MaxFilterTGIDs was built")
	}
	if _, err := procFilter([]ProcEventKind{ProcEventLost}, ForkFilter{}); err == nil {
		t.Error("a filter for lost events was built")
	}
}

func TestForkFilterCovers(t *testing.T) {
	f := ForkFilter{Above: 500, TGIDs: []int{100, 200}}
	for _, tc := range []struct {
		name string
		g    ForkFilter
		want bool
	}{
		{"itself", f, true},
		{"every fork", ForkFilter{}, true},
		{"a lower mark, the same processes", ForkFilter{Above: 400, TGIDs: []int{100, 200}}, true},
		{"a higher mark", ForkFilter{Above: 600, TGIDs: []int{100, 200}}, false},
		{"a process missing", ForkFilter{Above: 500, TGIDs: []int{100}}, false},
		{"a missing process above its own mark", ForkFilter{Above: 150, TGIDs: []int{100}}, true},
	} {
		if got := tc.g.Covers(f); got != tc.want {
			t.Errorf("%s: Covers = %v, want %v", tc.name, got, tc.want)
		}
	}
	if (ForkFilter{Above: 500}).Covers(ForkFilter{}) {
		t.Error("a narrow filter covers every fork")
	}
}

// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package mempolicy

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/containerd/nri/pkg/api"
	rspec "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/numapref/numapref/internal/numa"
)

func nodes(ids ...int) numa.NodeMask { return numa.NewNodeMask(ids...) }

// Every form mpol_to_str prints (mm/mempolicy.c) parses to its policy and prints back the
// same.
func TestParseKernelForms(t *testing.T) {
	tests := map[string]Policy{
		"default":                        {},
		"local":                          {Mode: ModeLocal},
		"prefer:1":                       Preferred(1),
		"prefer:0":                       Preferred(0),
		"prefer (many):0":                PreferredMany(nodes(0), false),
		"prefer (many):0-1":              PreferredMany(nodes(0, 1), false),
		"prefer (many)=balancing:0":      PreferredMany(nodes(0), true),
		"prefer (many)=balancing:0,2-3":  PreferredMany(nodes(0, 2, 3), true),
		"prefer=static:1":                {Mode: ModePreferred, Nodes: nodes(1), Flags: FlagStaticNodes},
		"prefer=relative:1":              {Mode: ModePreferred, Nodes: nodes(1), Flags: FlagRelativeNodes},
		"bind:0":                         {Mode: ModeBind, Nodes: nodes(0)},
		"bind=static|balancing:0-1":      {Mode: ModeBind, Nodes: nodes(0, 1), Flags: FlagStaticNodes | FlagNumaBalancing},
		"bind=relative|balancing:1":      {Mode: ModeBind, Nodes: nodes(1), Flags: FlagRelativeNodes | FlagNumaBalancing},
		"bind=balancing:3":               {Mode: ModeBind, Nodes: nodes(3), Flags: FlagNumaBalancing},
		"interleave:0-1":                 {Mode: ModeInterleave, Nodes: nodes(0, 1)},
		"interleave=static:0,2":          {Mode: ModeInterleave, Nodes: nodes(0, 2), Flags: FlagStaticNodes},
		"weighted interleave:0-3":        {Mode: ModeWeightedInterleave, Nodes: nodes(0, 1, 2, 3)},
		"weighted interleave=relative:1": {Mode: ModeWeightedInterleave, Nodes: nodes(1), Flags: FlagRelativeNodes},
	}
	for s, want := range tests {
		t.Run(s, func(t *testing.T) {
			got, err := Parse(s)
			if err != nil {
				t.Fatalf("Parse(%q): %v", s, err)
			}
			if !got.Equal(want) {
				t.Errorf("Parse(%q) = %s; want %s", s, got, want)
			}
			if got.String() != s {
				t.Errorf("Parse(%q).String() = %q", s, got.String())
			}
		})
	}
}

func TestParseRejects(t *testing.T) {
	for _, s := range []string{
		"", "prefer:", "prefer:x", "prefer:1-0", "prefer=:1", "prefer=fast:1", "prefer 1",
		"prefer (many)", "preferred:1", "bind=static|relative:0", "default:0", "local=static",
		"default=balancing", "unknown", "prefer:1 ", " prefer:1", "interleave:0-1:2",
	} {
		if p, err := Parse(s); err == nil {
			t.Errorf("Parse(%q) = %s; want an error", s, p)
		}
	}
}

// numa_maps formats a policy into 64 bytes: a string of that length may have lost nodes.
func TestParseTruncated(t *testing.T) {
	var ids []string
	for i := 0; i < 40; i += 2 {
		ids = append(ids, strconv.Itoa(i))
	}
	s := ("interleave:" + strings.Join(ids, ","))[:maxPolicyString] // "...,34,36,3"
	p, err := Parse(s)
	if !errors.Is(err, ErrTruncated) {
		t.Fatalf("Parse(%q) error = %v; want ErrTruncated", s, err)
	}
	if want := "interleave:0,2,4,6,8,10,12,14,16,18,20,22,24,26,28,30,32,34,36"; p.String() != want {
		t.Errorf("Parse(%q) = %s; want the whole nodes before the cut, %s", s, p, want)
	}
	line := "7f00 " + s + " anon=1 N0=1"
	if _, err := parseNumaMapsLine(line); !errors.Is(err, ErrTruncated) {
		t.Errorf("a numa_maps line with it: error = %v; want ErrTruncated", err)
	}
	if got, err := TaskPolicy(line + "\n7f10 prefer:1 file=/x N1=1\n"); err != nil || !got.Equal(Preferred(1)) {
		t.Errorf("TaskPolicy beside a cut line = %s, %v; want prefer:1", got, err)
	}
	if _, err := TaskPolicy(line + "\n"); !errors.Is(err, ErrTruncated) {
		t.Errorf("TaskPolicy of cut lines only: error = %v; want ErrTruncated", err)
	}
}

func TestTaskPolicy(t *testing.T) {
	tests := map[string]struct {
		file string
		want Policy
	}{
		"an ordinary process": {file: "default.txt", want: Policy{}},
		// Captured from runc 1.4.4's init at the exec fifo wait, created with
		// linux.memoryPolicy MPOL_PREFERRED_MANY, nodes "0", MPOL_F_NUMA_BALANCING.
		"runc init, main thread": {file: "runc-init-prefer-many-balancing.txt", want: PreferredMany(nodes(0), true)},
		// Its other threads have no policy: runc sets it on the thread that execs.
		"runc init, another thread": {file: "runc-init-other-thread.txt", want: Policy{}},
		// More anonymous mappings with a policy of their own (mbind) than the rest: the
		// file and stack lines still show the task's.
		"mbind regions outnumber the rest": {file: "mbind-interleave-two-nodes.txt", want: Preferred(1)},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join("testdata", "numa_maps", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			got, err := TaskPolicy(string(data))
			if err != nil {
				t.Fatal(err)
			}
			if !got.Equal(tc.want) {
				t.Errorf("TaskPolicy(%s) = %s; want %s", tc.file, got, tc.want)
			}
		})
	}
}

func TestTaskPolicyWithoutFileLines(t *testing.T) {
	text := "7f0000000000 bind:0 anon=1 N0=1\n7f0000100000 prefer:1 anon=1 N1=1\n7f0000200000 prefer:1 anon=2 N1=2\n"
	if got, err := TaskPolicy(text); err != nil || !got.Equal(Preferred(1)) {
		t.Errorf("TaskPolicy = %s, %v; want the most lines' prefer:1", got, err)
	}
	if _, err := TaskPolicy(""); !errors.Is(err, ErrNoMappings) {
		t.Errorf("TaskPolicy of nothing: error = %v; want ErrNoMappings", err)
	}
	if _, err := TaskPolicy("zz default\n"); err == nil {
		t.Error("TaskPolicy of a line without a hex address: no error")
	}
}

func TestReadTaskPolicy(t *testing.T) {
	root := t.TempDir()
	data, err := os.ReadFile(filepath.Join("testdata", "numa_maps", "mbind-interleave-two-nodes.txt"))
	if err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{"42", "42/task/43"} {
		if err := os.MkdirAll(filepath.Join(root, dir), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, dir, "numa_maps"), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if p, err := ReadTaskPolicy(root, 42); err != nil || !p.Equal(Preferred(1)) {
		t.Errorf("ReadTaskPolicy = %s, %v; want prefer:1", p, err)
	}
	if p, err := ReadThreadPolicy(root, 42, 43); err != nil || !p.Equal(Preferred(1)) {
		t.Errorf("ReadThreadPolicy = %s, %v; want prefer:1", p, err)
	}
	if _, err := ReadTaskPolicy(root, 7); !numa.IsTaskGone(err) {
		t.Errorf("ReadTaskPolicy of a missing process: error = %v; want it gone", err)
	}
	if err := os.MkdirAll(filepath.Join(root, "2"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "2", "numa_maps"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadTaskPolicy(root, 2); !errors.Is(err, ErrNoMappings) {
		t.Errorf("ReadTaskPolicy of a kernel thread: error = %v; want ErrNoMappings", err)
	}
}

// A numa_maps longer than the read is cut at its last whole line.
func TestReadHeadKeepsWholeLines(t *testing.T) {
	path := filepath.Join(t.TempDir(), "numa_maps")
	line := "7f0000000000 prefer:1 file=/x mapped=1 N1=1 kernelpagesize_kB=4\n"
	if err := os.WriteFile(path, []byte(strings.Repeat(line, 1000)), 0o644); err != nil {
		t.Fatal(err)
	}
	text, err := readHead(path, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if len(text) > 1000 || !strings.HasSuffix(text, "\n") || len(text)%len(line) != 0 {
		t.Errorf("readHead(1000) = %d bytes; want whole lines within the limit", len(text))
	}
	if _, err := readHead(path, 10); err == nil {
		t.Error("readHead with a limit shorter than a line: no error")
	}
}

func TestSoft(t *testing.T) {
	ok := []Policy{{}, {Mode: ModeLocal}, Preferred(3), PreferredMany(nodes(0, 1), false), PreferredMany(nodes(1), true)}
	for _, p := range ok {
		if err := p.Soft(); err != nil {
			t.Errorf("%s.Soft() = %v; want nil", p, err)
		}
	}
	notSoft := []Policy{
		{Mode: ModeBind, Nodes: nodes(0)},
		{Mode: ModeInterleave, Nodes: nodes(0, 1)},
		{Mode: ModeWeightedInterleave, Nodes: nodes(0, 1)},
		{Mode: ModePreferred, Nodes: nodes(0), Flags: FlagNumaBalancing},
		{Mode: ModePreferredMany, Nodes: nodes(0), Flags: FlagStaticNodes},
		{Mode: Mode(9)},
	}
	for _, p := range notSoft {
		if err := p.Soft(); !errors.Is(err, ErrNotSoft) {
			t.Errorf("%s.Soft() = %v; want ErrNotSoft", p, err)
		}
	}
	badNodes := []Policy{
		{Mode: ModePreferred}, {Mode: ModePreferred, Nodes: nodes(0, 1)},
		{Mode: ModePreferredMany}, {Mode: ModeDefault, Nodes: nodes(0)}, {Mode: ModeLocal, Flags: FlagNumaBalancing},
	}
	for _, p := range badNodes {
		if err := p.Soft(); err == nil {
			t.Errorf("%s.Soft() = nil; want an error", p)
		}
	}
}

func TestChoose(t *testing.T) {
	all := Support{Preferred: true, PreferredMany: true, PreferredManyBalancing: true}
	old := Support{Preferred: true, PreferredMany: true}
	ancient := Support{Preferred: true}
	tests := map[string]struct {
		nodes     numa.NodeMask
		balancing bool
		s         Support
		want      string // the policy, or "" for an error
	}{
		"one node":                       {nodes(1), false, all, "prefer:1"},
		"several nodes":                  {nodes(0, 1), false, all, "prefer (many):0-1"},
		"one node, balancing":            {nodes(1), true, all, "prefer (many)=balancing:1"},
		"several nodes, balancing":       {nodes(0, 1), true, all, "prefer (many)=balancing:0-1"},
		"balancing before 6.10":          {nodes(1), true, old, ""},
		"several nodes before 5.15":      {nodes(0, 1), false, ancient, ""},
		"one node before 5.15":           {nodes(1), false, ancient, "prefer:1"},
		"no node":                        {numa.NodeMask{}, false, all, ""},
		"a kernel without policies":      {nodes(0), false, Support{Node: -1}, ""},
		"several nodes, without balance": {nodes(2, 3), false, old, "prefer (many):2-3"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			p, err := Choose(tc.nodes, tc.balancing, tc.s)
			switch {
			case tc.want == "" && err == nil:
				t.Errorf("Choose = %s; want an error", p)
			case tc.want != "" && err != nil:
				t.Errorf("Choose: %v; want %s", err, tc.want)
			case tc.want != "" && p.String() != tc.want:
				t.Errorf("Choose = %s; want %s", p, tc.want)
			}
		})
	}
}

func TestOCI(t *testing.T) {
	tests := map[string]struct {
		p    Policy
		want OCIPolicy
	}{
		"preferred":      {Preferred(1), OCIPolicy{Mode: "MPOL_PREFERRED", Nodes: "1"}},
		"preferred many": {PreferredMany(nodes(0, 1, 3), false), OCIPolicy{Mode: "MPOL_PREFERRED_MANY", Nodes: "0-1,3"}},
		"with balancing": {PreferredMany(nodes(2), true), OCIPolicy{Mode: "MPOL_PREFERRED_MANY", Nodes: "2", Flags: []string{"MPOL_F_NUMA_BALANCING"}}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := tc.p.OCI()
			if err != nil {
				t.Fatal(err)
			}
			if got.Mode != tc.want.Mode || got.Nodes != tc.want.Nodes || strings.Join(got.Flags, ",") != strings.Join(tc.want.Flags, ",") {
				t.Errorf("OCI() = %+v; want %+v", got, tc.want)
			}
			back, err := ParseOCI(got)
			if err != nil || !back.Equal(tc.p) {
				t.Errorf("ParseOCI(OCI()) = %s, %v; want %s", back, err, tc.p)
			}
		})
	}
	for _, p := range []Policy{{}, {Mode: ModeLocal}, {Mode: ModeBind, Nodes: nodes(0)}, {Mode: ModeInterleave, Nodes: nodes(0, 1)}, {Mode: ModePreferred, Nodes: nodes(0, 1)}} {
		if o, err := p.OCI(); err == nil {
			t.Errorf("%s.OCI() = %+v; want an error: only a home is given at creation", p, o)
		}
	}
}

func TestParseOCIReadsEveryMode(t *testing.T) {
	for _, tc := range []struct {
		o    OCIPolicy
		want string
	}{
		{OCIPolicy{Mode: "MPOL_BIND", Nodes: "0", Flags: []string{"MPOL_F_STATIC_NODES"}}, "bind=static:0"},
		{OCIPolicy{Mode: "MPOL_WEIGHTED_INTERLEAVE", Nodes: "0-1"}, "weighted interleave:0-1"},
		{OCIPolicy{Mode: "MPOL_LOCAL"}, "local"},
		{OCIPolicy{Mode: "MPOL_DEFAULT"}, "default"},
		{OCIPolicy{Mode: "MPOL_PREFERRED"}, "prefer"},
	} {
		p, err := ParseOCI(tc.o)
		if err != nil || p.String() != tc.want {
			t.Errorf("ParseOCI(%+v) = %s, %v; want %s", tc.o, p, err, tc.want)
		}
	}
	for _, o := range []OCIPolicy{
		{Mode: "MPOL_FAST", Nodes: "0"}, {Mode: ""}, {Mode: "MPOL_BIND"}, {Mode: "MPOL_LOCAL", Nodes: "0"},
		{Mode: "MPOL_PREFERRED", Nodes: "x"}, {Mode: "MPOL_PREFERRED", Nodes: "0", Flags: []string{"MPOL_F_FAST"}},
	} {
		if p, err := ParseOCI(o); err == nil {
			t.Errorf("ParseOCI(%+v) = %s; want an error", o, p)
		}
	}
}

// The names are those of the runtime spec and of NRI, which the runtime converts by name.
func TestOCINamesMatchRuntimeSpecAndNRI(t *testing.T) {
	spec := map[Mode]rspec.MemoryPolicyModeType{
		ModeDefault: rspec.MpolDefault, ModePreferred: rspec.MpolPreferred, ModeBind: rspec.MpolBind,
		ModeInterleave: rspec.MpolInterleave, ModeLocal: rspec.MpolLocal,
		ModePreferredMany: rspec.MpolPreferredMany, ModeWeightedInterleave: rspec.MpolWeightedInterleave,
	}
	for m, name := range spec {
		if m.OCIName() != string(name) {
			t.Errorf("%s.OCIName() = %q; the runtime spec says %q", m, m.OCIName(), name)
		}
		if _, ok := api.MpolMode_value[m.OCIName()]; !ok {
			t.Errorf("%s.OCIName() = %q: NRI has no such MpolMode", m, m.OCIName())
		}
	}
	if len(api.MpolMode_name) != len(ociModeNames) {
		t.Errorf("NRI has %d modes, this package %d", len(api.MpolMode_name), len(ociModeNames))
	}
	specFlags := map[Flags]rspec.MemoryPolicyFlagType{
		FlagStaticNodes: rspec.MpolFStaticNodes, FlagRelativeNodes: rspec.MpolFRelativeNodes, FlagNumaBalancing: rspec.MpolFNumaBalancing,
	}
	for _, f := range ociFlagNames {
		if string(specFlags[f.flag]) != f.name {
			t.Errorf("flag %s is %q; the runtime spec says %q", f.flag, f.name, specFlags[f.flag])
		}
		if _, ok := api.MpolFlag_value[f.name]; !ok {
			t.Errorf("flag %q: NRI has no such MpolFlag", f.name)
		}
	}
}

// FuzzParse: any string parses to a policy that prints back to one that parses the same,
// or is an error; never a panic.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"default", "local", "prefer:1", "prefer (many)=balancing:0-1", "bind=static|balancing:0,2", "weighted interleave:0-3", "interleave=relative:1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := Parse(s)
		if err != nil && !errors.Is(err, ErrTruncated) {
			return
		}
		again, err := Parse(p.String())
		if err != nil && !errors.Is(err, ErrTruncated) {
			t.Fatalf("Parse(%q) = %s, which does not parse: %v", s, p, err)
		}
		if !again.Equal(p) {
			t.Fatalf("Parse(%q) = %s; printed and parsed again: %s", s, p, again)
		}
	})
}

// FuzzTaskPolicy: any numa_maps text gives a policy or an error, never a panic.
func FuzzTaskPolicy(f *testing.F) {
	for _, name := range []string{"default.txt", "mbind-interleave-two-nodes.txt"} {
		data, err := os.ReadFile(filepath.Join("testdata", "numa_maps", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(data))
	}
	f.Fuzz(func(t *testing.T, text string) {
		if p, err := TaskPolicy(text); err == nil && p.Mode.OCIName() == "" {
			t.Fatalf("TaskPolicy gave mode %d, which the kernel has not", p.Mode)
		}
	})
}

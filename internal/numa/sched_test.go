// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package numa

import (
	"bytes"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/numapref/numapref/internal/testutil/testenv"
)

func TestParseSchedNUMA(t *testing.T) {
	tests := map[string]struct {
		file    string
		want    SchedNUMA
		wantErr bool
	}{
		"unpatched 6.18, one node": {
			file: "testdata/sched/unpatched-6.18.txt",
			want: SchedNUMA{Present: true, PreferredNIDForce: -1, PreferredNID: -1, CurrentNode: 0,
				Faults: []NodeFaults{{Node: 0}}},
		},
		"patched, forced to node 1": {
			file: "testdata/sched/patched-forced.txt",
			want: SchedNUMA{Present: true, ForcePresent: true, PreferredNIDForce: 1, PreferredNID: 1,
				ScanSeq: 12, PagesMigrated: 14083, TotalFaults: 3562, CurrentNode: 1,
				Faults: []NodeFaults{{Node: 0, TaskPrivate: 120, TaskShared: 3}, {Node: 1, TaskPrivate: 3400, TaskShared: 39}}},
		},
		"patched, default": {
			file: "testdata/sched/patched-default.txt",
			want: SchedNUMA{Present: true, ForcePresent: true, PreferredNIDForce: -1, PreferredNID: -1, CurrentNode: 0,
				Faults: []NodeFaults{{Node: 0}, {Node: 1}}},
		},
		"without NUMA balancing": {
			file: "testdata/sched/no-numa-balancing.txt",
			want: SchedNUMA{PreferredNIDForce: -1, PreferredNID: -1, CurrentNode: -1},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			data, err := os.ReadFile(tc.file)
			if err != nil {
				t.Fatal(err)
			}
			got, err := ParseSchedNUMA(string(data))
			if (err != nil) != tc.wantErr {
				t.Fatalf("error %v, want error %v", err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// schedHeader is the header the kernel prints before the lines of /proc/<pid>/sched.
const schedHeader = "cat (4424, #threads: 1)\n-------------------------------------------------------------------\n"

// TestParseSchedNUMAMalformed: a known line with a malformed value, or a text without the
// header's separator, is an error.
func TestParseSchedNUMAMalformed(t *testing.T) {
	tests := map[string]string{
		"no header":               "numa_preferred_nid : 1\n",
		"only a comm's dashes":    "---------------\nnuma_preferred_nid : 1\n",
		"empty":                   "",
		"preferred not a number":  schedHeader + "numa_preferred_nid : x\n",
		"preferred below -1":      schedHeader + "numa_preferred_nid : -2\n",
		"force overflows int":     schedHeader + "numa_preferred_nid_force : 4294967296\n",
		"faults negative":         schedHeader + "total_numa_faults : -1\n",
		"current_node no value":   schedHeader + "current_node=, numa_group_id=0\n",
		"current_node no equals":  schedHeader + "current_node=0, numa_group_id\n",
		"fault line without node": schedHeader + "numa_faults task_private=0\n",
		"fault line bad count":    schedHeader + "numa_faults node=0 task_private=x\n",
		"fault line bad node":     schedHeader + "numa_faults node=-3 task_private=0\n",
		"fault field without =":   schedHeader + "numa_faults node=0 task_private\n",
	}
	for name, in := range tests {
		t.Run(name, func(t *testing.T) {
			if got, err := ParseSchedNUMA(in); err == nil {
				t.Errorf("ParseSchedNUMA(%q) = %+v, want an error", in, got)
			}
		})
	}
}

// TestParseSchedNUMAHostileComm: a task names itself (prctl PR_SET_NAME: any 15 bytes but
// NUL) with text shaped like the NUMA lines; what is parsed stays what the kernel printed.
func TestParseSchedNUMAHostileComm(t *testing.T) {
	comms := map[string]string{
		"a current_node line":         "current_node=7\n",
		"a broken current_node line":  "current_node=1",
		"a broken numa_faults line":   "numa_faults x=1",
		"a short line of dashes":      "\n-------------\n",
		"a key of the P() lines":      "\nx:1\nnuma_pa",
		"newlines only":               "\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n",
		"the start of a fault line":   "numa_faults\nno",
		"a comm ending in its header": ") 1\n---------",
	}
	for _, file := range schedFiles {
		benign := readSched(t, file)
		want, err := ParseSchedNUMA(benign)
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		for name, comm := range comms {
			t.Run(file+"/"+name, func(t *testing.T) {
				if kernelComm([]byte(comm)) != comm {
					t.Fatalf("comm %q is no name the kernel keeps", comm)
				}
				got, err := ParseSchedNUMA(withComm(benign, comm))
				if err != nil {
					t.Fatalf("comm %q: %v", comm, err)
				}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("comm %q changed what was parsed (-want +got):\n%s", comm, diff)
				}
			})
		}
	}
}

// schedFiles are the sched files of testdata/sched.
var schedFiles = []string{"unpatched-6.18.txt", "patched-forced.txt", "patched-default.txt", "no-numa-balancing.txt"}

func readSched(tb testing.TB, file string) string {
	tb.Helper()
	data, err := os.ReadFile("testdata/sched/" + file)
	if err != nil {
		tb.Fatal(err)
	}
	return string(data)
}

// withComm is the sched file text of a task named comm instead of "cat".
func withComm(text, comm string) string {
	return comm + strings.TrimPrefix(text, "cat")
}

// kernelComm is what the kernel keeps of a name given to PR_SET_NAME: up to the first NUL,
// at most 15 bytes.
func kernelComm(name []byte) string {
	if i := bytes.IndexByte(name, 0); i >= 0 {
		name = name[:i]
	}
	return string(name[:min(len(name), maxCommLen)])
}

// TestReadSchedNUMASelf reads this machine's real /proc/self/sched, which needs a kernel
// with NUMA balancing and its scheduler statistics built in; with or without the
// preferred-node patch.
func TestReadSchedNUMASelf(t *testing.T) {
	const kernel = "a kernel with CONFIG_SCHED_DEBUG and CONFIG_NUMA_BALANCING"
	s, err := ReadSchedNUMA("/proc", os.Getpid())
	testenv.Require(t, !errors.Is(err, ErrTaskGone), "/proc/<pid>/sched (CONFIG_SCHED_DEBUG)", kernel)
	if err != nil {
		t.Fatal(err)
	}
	testenv.Require(t, s.Present, "the NUMA lines of /proc/<pid>/sched (CONFIG_NUMA_BALANCING)", kernel)
	if s.PreferredNID < -1 || len(s.Faults) == 0 {
		t.Errorf("implausible NUMA lines: %+v", s)
	}
	t.Logf("this kernel: numa_preferred_nid_force present %v; %+v", s.ForcePresent, s)
}

func TestReadSchedNUMAGone(t *testing.T) {
	if _, err := ReadSchedNUMA(t.TempDir(), 1); !errors.Is(err, ErrTaskGone) {
		t.Errorf("error %v, want ErrTaskGone", err)
	}
}

func FuzzParseSchedNUMA(f *testing.F) {
	for _, file := range schedFiles {
		f.Add(readSched(f, file))
	}
	f.Add("current_node=1,numa_group_id=2")
	f.Add("numa_faults node=0")
	f.Fuzz(func(t *testing.T, s string) {
		got, err := ParseSchedNUMA(s)
		if err == nil && (got.PreferredNID < -1 || got.PreferredNIDForce < -1) {
			t.Errorf("node ids below -1 accepted: %+v", got)
		}
	})
}

// FuzzParseSchedNUMAComm: whatever a task names itself, the sched files of testdata parse
// as they do with a benign name.
func FuzzParseSchedNUMAComm(f *testing.F) {
	texts := make([]string, len(schedFiles))
	wants := make([]SchedNUMA, len(schedFiles))
	for i, file := range schedFiles {
		texts[i] = readSched(f, file)
		want, err := ParseSchedNUMA(texts[i])
		if err != nil {
			f.Fatalf("%s: %v", file, err)
		}
		wants[i] = want
	}
	for _, seed := range []string{"cat", "current_node=7\n", "numa_faults x=1", "\n-------------\n", "a\x00current_node=1"} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, name []byte) {
		comm := kernelComm(name)
		for i, text := range texts {
			got, err := ParseSchedNUMA(withComm(text, comm))
			if err != nil {
				t.Fatalf("%s with comm %q: %v", schedFiles[i], comm, err)
			}
			if diff := cmp.Diff(wants[i], got); diff != "" {
				t.Errorf("%s: comm %q changed what was parsed (-want +got):\n%s", schedFiles[i], comm, diff)
			}
		}
	})
}

package numa

import (
	"errors"
	"os"
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

func TestParseSchedNUMAMalformed(t *testing.T) {
	tests := map[string]string{
		"preferred not a number":  "numa_preferred_nid : x\n",
		"preferred below -1":      "numa_preferred_nid : -2\n",
		"force overflows int":     "numa_preferred_nid_force : 4294967296\n",
		"faults negative":         "total_numa_faults : -1\n",
		"current_node no value":   "current_node=, numa_group_id=0\n",
		"current_node no equals":  "current_node=0, numa_group_id\n",
		"fault line without node": "numa_faults task_private=0\n",
		"fault line bad count":    "numa_faults node=0 task_private=x\n",
		"fault line bad node":     "numa_faults node=-3 task_private=0\n",
		"fault field without =":   "numa_faults node=0 task_private\n",
	}
	for name, in := range tests {
		t.Run(name, func(t *testing.T) {
			if got, err := ParseSchedNUMA(in); err == nil {
				t.Errorf("ParseSchedNUMA(%q) = %+v, want an error", in, got)
			}
		})
	}
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
	for _, file := range []string{"unpatched-6.18.txt", "patched-forced.txt", "patched-default.txt", "no-numa-balancing.txt"} {
		data, err := os.ReadFile("testdata/sched/" + file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(data))
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

// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package numa

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// numaStatFixture is a container's memory.numa_stat from a cgroup v2 host with two nodes.
const numaStatFixture = "testdata/cgroup/memory.numa_stat"

func TestParseNumaStat(t *testing.T) {
	tests := map[string]struct {
		text    string
		want    map[string]map[int]uint64
		wantErr bool
	}{
		"two nodes": {
			text: "anon N0=4096 N1=8192\nfile N0=0 N1=12288\n",
			want: map[string]map[int]uint64{"anon": {0: 4096, 1: 8192}, "file": {0: 0, 1: 12288}},
		},
		"empty":           {text: "", want: map[string]map[int]uint64{}},
		"v1 format":       {text: "total=3 N0=3\n", wantErr: true},
		"bad value":       {text: "anon N0=x\n", wantErr: true},
		"negative":        {text: "anon N0=-1\n", wantErr: true},
		"no node":         {text: "anon N=1\n", wantErr: true},
		"not a node":      {text: "anon X0=1\n", wantErr: true},
		"huge node":       {text: "anon N99999999=1\n", wantErr: true},
		"node twice":      {text: "anon N0=1 N0=2\n", wantErr: true},
		"item twice":      {text: "anon N0=1\nanon N0=2\n", wantErr: true},
		"missing equals":  {text: "anon N0\n", wantErr: true},
		"value too large": {text: "anon N0=18446744073709551616\n", wantErr: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := parseNumaStat(tc.text)
			if (err != nil) != tc.wantErr {
				t.Fatalf("error = %v, want error %v", err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got)\n%s", diff)
			}
		})
	}
}

func TestReadNumaStatMemoryFixture(t *testing.T) {
	got, err := ReadNumaStatMemory(numaStatFixture)
	if err != nil {
		t.Fatal(err)
	}
	// anon+file; shmem is part of file, kernel memory and page tables are not counted.
	if diff := cmp.Diff(map[int]uint64{0: 1048576 + 524288, 1: 3145728}, got); diff != "" {
		t.Errorf("(-want +got)\n%s", diff)
	}
}

func TestParseNumaMaps(t *testing.T) {
	tests := map[string]struct {
		text    string
		want    map[int]uint64
		wantErr bool
	}{
		"file and anon": {
			text: "55d0c8a00000 default file=/usr/bin/app mapped=3 N0=3 kernelpagesize_kB=4\n" +
				"55d0c8c00000 default anon=5 dirty=5 N0=2 N1=3 kernelpagesize_kB=4\n",
			want: map[int]uint64{0: 5 * 4096, 1: 3 * 4096},
		},
		"hugetlb pages": {
			text: "7f0000000000 default file=/anon_hugepage\\040(deleted) huge anon=2 dirty=2 N1=2 kernelpagesize_kB=2048\n",
			want: map[int]uint64{1: 2 * 2 << 20},
		},
		"no page size: the system's": {
			text: "7f0000000000 bind:1 anon=1 N1=1\n",
			want: map[int]uint64{1: 4096},
		},
		"policy with a space, no pages": {
			text: "7f0000000000 prefer (many):0-1 stack\n7f0000001000 interleave:0-1 heap anon=4 N0=4 kernelpagesize_kB=4\n",
			want: map[int]uint64{0: 4 * 4096},
		},
		"empty":          {text: "", want: map[int]uint64{}},
		"bad address":    {text: "zz default N0=1\n", wantErr: true},
		"bad pages":      {text: "1000 default N0=x kernelpagesize_kB=4\n", wantErr: true},
		"bad page size":  {text: "1000 default N0=1 kernelpagesize_kB=0\n", wantErr: true},
		"huge node":      {text: "1000 default N4294967296=1\n", wantErr: true},
		"overflow":       {text: "1000 default N0=18446744073709551615 kernelpagesize_kB=4\n", wantErr: true},
		"sum overflow":   {text: "1000 default N0=4503599627370495 kernelpagesize_kB=4\n2000 default N0=4503599627370495 kernelpagesize_kB=4\n", wantErr: true},
		"field no value": {text: "1000 default N0\n", wantErr: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := parseNumaMaps(tc.text, 4096)
			if (err != nil) != tc.wantErr {
				t.Fatalf("error = %v, want error %v", err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got)\n%s", diff)
			}
		})
	}
}

// FuzzParseNumaMaps: any text gives bytes or an error, never a panic; bytes are whole
// pages of 4 KiB at least.
func FuzzParseNumaMaps(f *testing.F) {
	f.Add("55d0c8c00000 default anon=5 dirty=5 N0=2 N1=3 kernelpagesize_kB=4\n")
	f.Add("7f0000000000 prefer (many):0-1 huge N1=2 kernelpagesize_kB=2048\n")
	f.Add("1000 default N0=18446744073709551615 kernelpagesize_kB=4\n")
	f.Fuzz(func(t *testing.T, text string) {
		got, err := parseNumaMaps(text, 4096)
		if err != nil {
			if got != nil {
				t.Errorf("bytes %v beside error %v", got, err)
			}
			return
		}
		for node, b := range got {
			if node < 0 || node > maxID || b%1024 != 0 {
				t.Errorf("node %d has %d bytes", node, b)
			}
		}
	})
}

// FuzzParseNumaStat: any text gives items or an error, never a panic; a parsed file
// parses the same when printed back.
func FuzzParseNumaStat(f *testing.F) {
	data, err := os.ReadFile(numaStatFixture)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(string(data))
	f.Add("total=3 N0=3\n")
	f.Add("anon N0=1 N0=2\n")
	f.Fuzz(func(t *testing.T, text string) {
		got, err := parseNumaStat(text)
		if err != nil {
			return
		}
		var b strings.Builder
		for name, nodes := range got {
			b.WriteString(name)
			for node, v := range nodes {
				fmt.Fprintf(&b, " N%d=%d", node, v)
			}
			b.WriteString("\n")
		}
		again, err := parseNumaStat(b.String())
		if err != nil {
			t.Fatalf("reparsing %q: %v", b.String(), err)
		}
		if diff := cmp.Diff(got, again); diff != "" {
			t.Errorf("(-first +reparsed)\n%s", diff)
		}
	})
}

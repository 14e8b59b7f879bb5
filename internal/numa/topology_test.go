// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package numa

import (
	"bufio"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const gib = 1 << 30

func TestDiscoverTopology(t *testing.T) {
	eightNodes := func() *Topology {
		rows := [][]int{
			{10, 11, 12, 12, 32, 32, 32, 32}, {11, 10, 12, 12, 32, 32, 32, 32},
			{12, 12, 10, 11, 32, 32, 32, 32}, {12, 12, 11, 10, 32, 32, 32, 32},
			{32, 32, 32, 32, 10, 11, 12, 12}, {32, 32, 32, 32, 11, 10, 12, 12},
			{32, 32, 32, 32, 12, 12, 10, 11}, {32, 32, 32, 32, 12, 12, 11, 10},
		}
		all := []int{0, 1, 2, 3, 4, 5, 6, 7}
		topo := &Topology{Online: all, Possible: all, HasMemory: all, HasCPU: all, Nodes: map[int]NodeInfo{}, CPUNode: map[int]int{}}
		for n, row := range rows {
			d := map[int]int{}
			for m, v := range row {
				d[m] = v
			}
			cpus := []int{4 * n, 4*n + 1, 4*n + 2, 4*n + 3, 32 + 4*n, 33 + 4*n, 34 + 4*n, 35 + 4*n}
			topo.Nodes[n] = NodeInfo{CPUs: cpus, Distances: d, MemTotalBytes: 16 * gib}
			for _, c := range cpus {
				topo.CPUNode[c] = n
			}
		}
		return topo
	}
	tests := map[string]struct {
		root        string
		want        *Topology
		numPossible int
	}{
		"one node": {
			root: "testdata/sysfs/one-node",
			want: &Topology{Online: []int{0}, Possible: []int{0}, HasMemory: []int{0}, HasCPU: []int{0},
				Nodes:   map[int]NodeInfo{0: {CPUs: []int{0, 1, 2, 3}, Distances: map[int]int{0: 10}, MemTotalBytes: 8 * gib}},
				CPUNode: map[int]int{0: 0, 1: 0, 2: 0, 3: 0}},
			numPossible: 1,
		},
		"two nodes": {
			root: "testdata/sysfs/two-nodes",
			want: &Topology{Online: []int{0, 1}, Possible: []int{0, 1}, HasMemory: []int{0, 1}, HasCPU: []int{0, 1},
				Nodes: map[int]NodeInfo{
					0: {CPUs: []int{0, 1, 2, 3}, Distances: map[int]int{0: 10, 1: 21}, MemTotalBytes: 16 * gib},
					1: {CPUs: []int{4, 5, 6, 7}, Distances: map[int]int{0: 21, 1: 10}, MemTotalBytes: 16 * gib},
				},
				CPUNode: map[int]int{0: 0, 1: 0, 2: 0, 3: 0, 4: 1, 5: 1, 6: 1, 7: 1}},
			numPossible: 2,
		},
		"sparse possible nodes {0,2}": {
			root: "testdata/sysfs/sparse",
			want: &Topology{Online: []int{0, 2}, Possible: []int{0, 2}, HasMemory: []int{0, 2}, HasCPU: []int{0, 2},
				Nodes: map[int]NodeInfo{
					0: {CPUs: []int{0, 1}, Distances: map[int]int{0: 10, 2: 20}, MemTotalBytes: 4 * gib},
					2: {CPUs: []int{2, 3}, Distances: map[int]int{0: 20, 2: 10}, MemTotalBytes: 4 * gib},
				},
				CPUNode: map[int]int{0: 0, 1: 0, 2: 2, 3: 2}},
			// num_possible_nodes() is a count: node id 2 is not below it.
			numPossible: 2,
		},
		"memoryless node": {
			root: "testdata/sysfs/memoryless",
			want: &Topology{Online: []int{0, 1}, Possible: []int{0, 1}, HasMemory: []int{0}, HasCPU: []int{0, 1},
				Nodes: map[int]NodeInfo{
					0: {CPUs: []int{0, 1}, Distances: map[int]int{0: 10, 1: 20}, MemTotalBytes: 8 * gib},
					1: {CPUs: []int{2, 3}, Distances: map[int]int{0: 20, 1: 10}, MemTotalBytes: 0},
				},
				CPUNode: map[int]int{0: 0, 1: 0, 2: 1, 3: 1}},
			numPossible: 2,
		},
		"eight nodes with a distance matrix": {root: "testdata/sysfs/eight-nodes", want: eightNodes(), numPossible: 8},
		"kernel without NUMA": {
			root: "testdata/sysfs/no-numa",
			want: &Topology{Online: []int{0}, Possible: []int{0}, HasMemory: []int{0}, HasCPU: []int{0},
				Nodes:   map[int]NodeInfo{0: {CPUs: []int{0, 1}, Distances: map[int]int{0: 10}}},
				CPUNode: map[int]int{0: 0, 1: 0}, Synthetic: true},
			numPossible: 1,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := DiscoverTopology(tc.root)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			if got.NumPossible() != tc.numPossible {
				t.Errorf("NumPossible() = %d, want %d", got.NumPossible(), tc.numPossible)
			}
		})
	}
}

func TestDiscoverTopologyErrors(t *testing.T) {
	tests := map[string]map[string]string{
		"no online list": {"devices/system/node/possible": "0\n"},
		"bad online list": {
			"devices/system/node/online": "x\n", "devices/system/node/possible": "0\n",
		},
		"online node without a directory": {
			"devices/system/node/online": "0\n", "devices/system/node/possible": "0\n",
		},
		"distance count differs from online nodes": {
			"devices/system/node/online": "0-1\n", "devices/system/node/possible": "0-1\n",
			"devices/system/node/node0/cpulist": "0\n", "devices/system/node/node0/distance": "10\n",
			"devices/system/node/node0/meminfo": "Node 0 MemTotal: 1 kB\n",
		},
		"meminfo without MemTotal": {
			"devices/system/node/online": "0\n", "devices/system/node/possible": "0\n",
			"devices/system/node/node0/cpulist": "0\n", "devices/system/node/node0/distance": "10\n",
			"devices/system/node/node0/meminfo": "Node 0 MemFree: 1 kB\n",
		},
		"no node and no cpu list": {"devices/system/cpu/possible": "0\n"},
	}
	for name, files := range tests {
		t.Run(name, func(t *testing.T) {
			root := t.TempDir()
			for path, content := range files {
				writeFile(t, root+"/"+path, content)
			}
			if got, err := DiscoverTopology(root); err == nil {
				t.Errorf("DiscoverTopology = %+v, want an error", got)
			}
		})
	}
}

// TestDiscoverTopologyHere reads this machine's sysfs.
func TestDiscoverTopologyHere(t *testing.T) {
	topo, err := DiscoverTopology("/sys")
	if err != nil {
		t.Fatal(err)
	}
	if len(topo.Online) == 0 || topo.NumPossible() < len(topo.Online) || len(topo.CPUNode) == 0 {
		t.Errorf("implausible topology: %+v", topo)
	}
	for _, id := range topo.Online {
		if topo.Nodes[id].Distances[id] != 10 {
			t.Errorf("node %d: local distance %d, want 10", id, topo.Nodes[id].Distances[id])
		}
	}
}

func TestParseDistances(t *testing.T) {
	tests := map[string]struct {
		in      string
		online  []int
		want    map[int]int
		wantErr bool
	}{
		"two":       {in: "10 21\n", online: []int{0, 1}, want: map[int]int{0: 10, 1: 21}},
		"sparse":    {in: "20 10", online: []int{0, 2}, want: map[int]int{0: 20, 2: 10}},
		"too few":   {in: "10", online: []int{0, 1}, wantErr: true},
		"too many":  {in: "10 20 30", online: []int{0, 1}, wantErr: true},
		"not a u8":  {in: "10 256", online: []int{0, 1}, wantErr: true},
		"not a num": {in: "10 x", online: []int{0, 1}, wantErr: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ParseDistances(tc.in, tc.online)
			if (err != nil) != tc.wantErr {
				t.Fatalf("error %v, want error %v", err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseNodeMemTotal(t *testing.T) {
	tests := map[string]struct {
		in      string
		want    uint64
		wantErr bool
	}{
		"real":      {in: "Node 0 MemTotal:        5596960 kB\nNode 0 MemFree:  1 kB\n", want: 5596960 * 1024},
		"zero":      {in: "Node 1 MemTotal: 0 kB\n", want: 0},
		"missing":   {in: "Node 0 MemFree: 1 kB\n", wantErr: true},
		"bad value": {in: "Node 0 MemTotal: x kB\n", wantErr: true},
		"overflow":  {in: "Node 0 MemTotal: 18446744073709551615 kB\n", wantErr: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ParseNodeMemTotal(bufio.NewReader(strings.NewReader(tc.in)))
			if (err != nil) != tc.wantErr {
				t.Fatalf("error %v, want error %v", err, tc.wantErr)
			}
			if got != tc.want {
				t.Errorf("got %d, want %d", got, tc.want)
			}
		})
	}
}

func TestNodeMask(t *testing.T) {
	m := NewNodeMask(0, 2, 64, 65, -1)
	type view struct {
		IDs          []int
		List, Hex    string
		Has2, Has3   bool
		HasNegative  bool
		HasBeyondEnd bool
	}
	want := view{IDs: []int{0, 2, 64, 65}, List: "0,2,64-65", Hex: "00000003,00000000,00000005", Has2: true}
	got := view{m.IDs(), m.String(), m.Hex(), m.Has(2), m.Has(3), m.Has(-1), m.Has(1000)}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if got := (NodeMask{}).Hex(); got != "0" {
		t.Errorf("empty mask Hex = %q, want 0", got)
	}
}

func TestParseNodeMask(t *testing.T) {
	tests := map[string]struct {
		in      string
		want    []int
		wantErr bool
	}{
		"Mems_allowed, one node":  {in: "00000000,00000001\n", want: []int{0}},
		"cpumap, 4 cpus":          {in: "f", want: []int{0, 1, 2, 3}},
		"two words":               {in: "00000003,00000005", want: []int{0, 2, 32, 33}},
		"empty":                   {in: "", want: nil},
		"word too long":           {in: "100000000", wantErr: true},
		"empty word":              {in: "1,,1", wantErr: true},
		"not hex":                 {in: "g", wantErr: true},
		"sign":                    {in: "-1", wantErr: true},
		"round trip of a sparse":  {in: NewNodeMask(0, 2).Hex(), want: []int{0, 2}},
		"round trip of node 1000": {in: NewNodeMask(1000).Hex(), want: []int{1000}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ParseNodeMask(tc.in)
			if (err != nil) != tc.wantErr {
				t.Fatalf("error %v, want error %v", err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got.IDs()); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func FuzzParseNodeMask(f *testing.F) {
	for _, s := range []string{"", "f", "00000000,00000001", "ffffffff,ffffffff", ",", "1,,"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		m, err := ParseNodeMask(s)
		if err != nil {
			return
		}
		again, err := ParseNodeMask(m.Hex())
		if err != nil {
			t.Fatalf("Hex %q of %q does not parse: %v", m.Hex(), s, err)
		}
		if diff := cmp.Diff(m.IDs(), again.IDs()); diff != "" {
			t.Fatalf("round trip of %q (-first +second):\n%s", s, diff)
		}
	})
}

func FuzzParseDistances(f *testing.F) {
	f.Add("10 21", 2)
	f.Add("10 11 12 12 32 32 32 32", 8)
	f.Add("", 0)
	f.Fuzz(func(t *testing.T, s string, n int) {
		online := make([]int, min(max(n, 0), 64))
		for i := range online {
			online[i] = i
		}
		if d, err := ParseDistances(s, online); err == nil && len(d) != len(online) {
			t.Errorf("%d distances for %d nodes", len(d), len(online))
		}
	})
}

func FuzzParseNodeMemTotal(f *testing.F) {
	f.Add("Node 0 MemTotal:        5596960 kB\n")
	f.Add("Node 0 MemTotal: 18446744073709551615 kB\n")
	f.Fuzz(func(t *testing.T, s string) {
		_, _ = ParseNodeMemTotal(bufio.NewReader(strings.NewReader(s)))
	})
}

func TestReadOnline(t *testing.T) {
	tests := map[string]struct {
		root string
		want Online
	}{
		"two nodes": {"testdata/sysfs/two-nodes",
			Online{Nodes: []int{0, 1}, CPUNode: map[int]int{0: 0, 1: 0, 2: 0, 3: 0, 4: 1, 5: 1, 6: 1, 7: 1}}},
		"sparse": {"testdata/sysfs/sparse", func() Online {
			topo, err := DiscoverTopology("testdata/sysfs/sparse")
			if err != nil {
				t.Fatal(err)
			}
			return Online{Nodes: topo.Online, CPUNode: topo.CPUNode}
		}()},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ReadOnline(tc.root)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("ReadOnline (-want +got):\n%s", diff)
			}
		})
	}
	if _, err := ReadOnline(t.TempDir() + "/missing"); err == nil {
		t.Error("ReadOnline of a root with neither nodes nor CPUs: no error")
	}
}

// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package numa

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Topology is the machine's NUMA layout as sysfs shows it under devices/system/node.
type Topology struct {
	// Online, Possible, HasMemory and HasCPU are the node state lists
	// (devices/system/node/{online,possible,has_memory,has_cpu}), sorted.
	Online    []int `json:"online"`
	Possible  []int `json:"possible"`
	HasMemory []int `json:"hasMemory"`
	HasCPU    []int `json:"hasCpu"`
	// Nodes describes every online node.
	Nodes map[int]NodeInfo `json:"nodes"`
	// CPUNode maps each CPU listed by a node to that node.
	CPUNode map[int]int `json:"cpuNode"`
	// Synthetic is true when sysfs has no devices/system/node (a kernel without CONFIG_NUMA):
	// the topology is then one node 0 holding the online CPUs.
	Synthetic bool `json:"synthetic,omitempty"`
}

// NodeInfo describes one online node.
type NodeInfo struct {
	CPUs []int `json:"cpus"`
	// Distances maps each online node to its distance from this one (10 is local).
	Distances     map[int]int `json:"distances"`
	MemTotalBytes uint64      `json:"memTotalBytes"`
}

// NumPossible is num_possible_nodes(): the number of possible nodes, which is what the
// PR_PREFERRED_NID patch compares node ids with. With sparse ids ({0,2}) it is smaller
// than the highest id plus one.
func (t *Topology) NumPossible() int { return len(t.Possible) }

// DiscoverTopology reads the NUMA topology from sysRoot (normally "/sys").
func DiscoverTopology(sysRoot string) (*Topology, error) {
	nodeDir := filepath.Join(sysRoot, "devices", "system", "node")
	if _, err := os.Stat(nodeDir); errors.Is(err, os.ErrNotExist) {
		return syntheticTopology(sysRoot)
	}
	t := &Topology{Nodes: map[int]NodeInfo{}, CPUNode: map[int]int{}}
	lists := []struct {
		name     string
		dst      *[]int
		optional bool
	}{
		{"online", &t.Online, false},
		{"possible", &t.Possible, false},
		{"has_memory", &t.HasMemory, true},
		{"has_cpu", &t.HasCPU, true},
	}
	for _, l := range lists {
		ids, err := readList(filepath.Join(nodeDir, l.name))
		if l.optional && errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("discovering NUMA topology: %w", err)
		}
		*l.dst = ids
	}
	for _, id := range t.Online {
		info, err := readNode(filepath.Join(nodeDir, "node"+strconv.Itoa(id)), t.Online)
		if err != nil {
			return nil, fmt.Errorf("discovering NUMA topology: node %d: %w", id, err)
		}
		t.Nodes[id] = info
		for _, cpu := range info.CPUs {
			t.CPUNode[cpu] = id
		}
	}
	return t, nil
}

func syntheticTopology(sysRoot string) (*Topology, error) {
	cpus, err := readList(filepath.Join(sysRoot, "devices", "system", "cpu", "online"))
	if err != nil {
		return nil, fmt.Errorf("discovering topology without NUMA nodes in sysfs: %w", err)
	}
	t := &Topology{
		Online: []int{0}, Possible: []int{0}, HasMemory: []int{0}, HasCPU: []int{0},
		Nodes:     map[int]NodeInfo{0: {CPUs: cpus, Distances: map[int]int{0: 10}}},
		CPUNode:   map[int]int{},
		Synthetic: true,
	}
	for _, cpu := range cpus {
		t.CPUNode[cpu] = 0
	}
	return t, nil
}

func readNode(dir string, online []int) (NodeInfo, error) {
	var info NodeInfo
	var err error
	if info.CPUs, err = readList(filepath.Join(dir, "cpulist")); err != nil {
		return NodeInfo{}, err
	}
	data, err := os.ReadFile(filepath.Join(dir, "distance"))
	if err != nil {
		return NodeInfo{}, fmt.Errorf("reading distances: %w", err)
	}
	if info.Distances, err = ParseDistances(string(data), online); err != nil {
		return NodeInfo{}, err
	}
	f, err := os.Open(filepath.Join(dir, "meminfo"))
	if err != nil {
		return NodeInfo{}, fmt.Errorf("reading meminfo: %w", err)
	}
	defer f.Close()
	if info.MemTotalBytes, err = ParseNodeMemTotal(bufio.NewReader(f)); err != nil {
		return NodeInfo{}, err
	}
	return info, nil
}

func readList(path string) ([]int, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", filepath.Base(path), err)
	}
	ids, err := ParseList(string(data))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", filepath.Base(path), err)
	}
	return ids, nil
}

// ParseDistances parses a node's distance file. The kernel prints one distance per online
// node, in the order of the online list, so the i-th number belongs to online[i].
func ParseDistances(s string, online []int) (map[int]int, error) {
	fields := strings.Fields(s)
	if len(fields) != len(online) {
		return nil, fmt.Errorf("parsing distances %q: %d values for %d online nodes", strings.TrimSpace(s), len(fields), len(online))
	}
	d := make(map[int]int, len(fields))
	for i, field := range fields {
		v, err := strconv.ParseUint(field, 10, 8)
		if err != nil {
			return nil, fmt.Errorf("parsing distances %q: invalid distance %q", strings.TrimSpace(s), field)
		}
		d[online[i]] = int(v)
	}
	return d, nil
}

// ParseNodeMemTotal finds "Node N MemTotal: X kB" in a node's meminfo and returns X in bytes.
func ParseNodeMemTotal(r *bufio.Reader) (uint64, error) { return ParseNodeMeminfo(r, "MemTotal") }

// ParseNodeMeminfo finds "Node N <field>: X kB" in a node's meminfo and returns X in bytes.
func ParseNodeMeminfo(r *bufio.Reader, field string) (uint64, error) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		// Node 0 MemTotal: 5596960 kB
		if len(fields) != 5 || fields[0] != "Node" || fields[2] != field+":" || fields[4] != "kB" {
			continue
		}
		kb, err := strconv.ParseUint(fields[3], 10, 64)
		if err != nil || kb > (1<<64-1)/1024 {
			return 0, fmt.Errorf("parsing node %s %q", field, sc.Text())
		}
		return kb * 1024, nil
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("reading node meminfo: %w", err)
	}
	return 0, fmt.Errorf("node meminfo has no %s line", field)
}

// ReadNodeMemFree returns the free memory of NUMA node id, in bytes, from
// <sysRoot>/devices/system/node/node<id>/meminfo.
func ReadNodeMemFree(sysRoot string, id int) (uint64, error) {
	path := filepath.Join(sysRoot, "devices", "system", "node", "node"+strconv.Itoa(id), "meminfo")
	f, err := os.Open(path)
	if err != nil {
		return 0, fmt.Errorf("reading free memory of NUMA node %d: %w", id, err)
	}
	defer f.Close()
	free, err := ParseNodeMeminfo(bufio.NewReader(f), "MemFree")
	if err != nil {
		return 0, fmt.Errorf("reading %s: %w", path, err)
	}
	return free, nil
}

// NodeMask is a set of node (or CPU) ids, as the kernel's nodemask_t and cpumask_t are.
// The zero value is empty.
type NodeMask struct {
	words []uint64
}

// NewNodeMask returns a mask holding ids; negative ids are ignored.
func NewNodeMask(ids ...int) NodeMask {
	var m NodeMask
	for _, id := range ids {
		m.Set(id)
	}
	return m
}

// Set adds id to the mask; negative ids are ignored.
func (m *NodeMask) Set(id int) {
	if id < 0 {
		return
	}
	w := id / 64
	for len(m.words) <= w {
		m.words = append(m.words, 0)
	}
	m.words[w] |= 1 << (id % 64)
}

// Has reports whether id is in the mask.
func (m NodeMask) Has(id int) bool {
	w := id / 64
	return id >= 0 && w < len(m.words) && m.words[w]&(1<<(id%64)) != 0
}

// IDs returns the ids in the mask, ascending.
func (m NodeMask) IDs() []int {
	var ids []int
	for w, word := range m.words {
		for b := range 64 {
			if word&(1<<b) != 0 {
				ids = append(ids, w*64+b)
			}
		}
	}
	return ids
}

// String prints the mask in the kernel's list format ("0-3,8").
func (m NodeMask) String() string { return FormatList(m.IDs()) }

// Hex prints the mask in the kernel's bitmap format: comma-separated 32-bit hex words,
// most significant first ("00000001,00000003"); an empty mask is "0".
func (m NodeMask) Hex() string {
	var chunks []string
	for _, word := range m.words {
		chunks = append(chunks, fmt.Sprintf("%08x", uint32(word)), fmt.Sprintf("%08x", uint32(word>>32)))
	}
	for len(chunks) > 1 && chunks[len(chunks)-1] == "00000000" {
		chunks = chunks[:len(chunks)-1]
	}
	if len(chunks) == 0 {
		return "0"
	}
	var b strings.Builder
	for i := len(chunks) - 1; i >= 0; i-- {
		b.WriteString(chunks[i])
		if i > 0 {
			b.WriteByte(',')
		}
	}
	return b.String()
}

// ParseNodeMask parses the kernel's bitmap format, as printed in cpumap files and the
// Mems_allowed line of /proc/<pid>/status: comma-separated hex words of 32 bits, most
// significant first.
func ParseNodeMask(s string) (NodeMask, error) {
	s = strings.TrimSpace(s)
	var m NodeMask
	if s == "" {
		return m, nil
	}
	chunks := strings.Split(s, ",")
	if len(chunks) > maxID/32+1 {
		return NodeMask{}, fmt.Errorf("parsing mask %q: too many words", s)
	}
	for i, chunk := range chunks {
		if chunk == "" || len(chunk) > 8 {
			return NodeMask{}, fmt.Errorf("parsing mask %q: invalid word %q", s, chunk)
		}
		v, err := strconv.ParseUint(chunk, 16, 32)
		if err != nil {
			return NodeMask{}, fmt.Errorf("parsing mask %q: invalid word %q", s, chunk)
		}
		base := (len(chunks) - 1 - i) * 32
		for b := range 32 {
			if v&(1<<b) != 0 {
				m.Set(base + b)
			}
		}
	}
	return m, nil
}

// Online is the part of the topology that changes while the host runs: the nodes online
// and the node of each online CPU (node and CPU hotplug).
type Online struct {
	Nodes   []int
	CPUNode map[int]int
}

// ReadOnline reads the online nodes and the node of each of their CPUs from sysRoot
// (normally "/sys"): a few small files, cheap enough to read at every full pass. Without
// devices/system/node (no CONFIG_NUMA) it is node 0 with the online CPUs, as in
// DiscoverTopology.
func ReadOnline(sysRoot string) (Online, error) {
	nodeDir := filepath.Join(sysRoot, "devices", "system", "node")
	if _, err := os.Stat(nodeDir); errors.Is(err, os.ErrNotExist) {
		t, err := syntheticTopology(sysRoot)
		if err != nil {
			return Online{}, err
		}
		return Online{Nodes: t.Online, CPUNode: t.CPUNode}, nil
	}
	nodes, err := readList(filepath.Join(nodeDir, "online"))
	if err != nil {
		return Online{}, fmt.Errorf("reading the online NUMA nodes: %w", err)
	}
	out := Online{Nodes: nodes, CPUNode: map[int]int{}}
	for _, id := range nodes {
		cpus, err := readList(filepath.Join(nodeDir, "node"+strconv.Itoa(id), "cpulist"))
		if err != nil {
			return Online{}, fmt.Errorf("reading the CPUs of NUMA node %d: %w", id, err)
		}
		for _, cpu := range cpus {
			out.CPUNode[cpu] = id
		}
	}
	return out, nil
}

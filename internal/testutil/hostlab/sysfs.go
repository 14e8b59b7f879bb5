// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package hostlab

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// FakeNUMASysfs writes, under dir, the devices/system/node tree of a machine with nodes
// NUMA nodes (ids 0..nodes-1) of cpusPerNode CPUs each, node i having memFreeMiB[i] MiB
// free (0 when the slice is short), and returns dir: a sysfs root for
// numa.DiscoverTopology, numa.ReadNodeMemFree and the emulator's num_possible_nodes().
func FakeNUMASysfs(dir string, nodes, cpusPerNode int, memFreeMiB ...uint64) (string, error) {
	base := filepath.Join(dir, "devices", "system")
	all := fmt.Sprintf("0-%d", nodes-1)
	if nodes == 1 {
		all = "0"
	}
	files := map[string]string{
		"node/online": all, "node/possible": all, "node/has_cpu": all, "node/has_memory": all,
		"cpu/online": fmt.Sprintf("0-%d", nodes*cpusPerNode-1), "cpu/possible": fmt.Sprintf("0-%d", nodes*cpusPerNode-1),
	}
	for i := range nodes {
		var dist []string
		for j := range nodes {
			d := "20"
			if i == j {
				d = "10"
			}
			dist = append(dist, d)
		}
		free := uint64(0)
		if i < len(memFreeMiB) {
			free = memFreeMiB[i]
		}
		node := fmt.Sprintf("node/node%d/", i)
		files[node+"cpulist"] = fmt.Sprintf("%d-%d", i*cpusPerNode, (i+1)*cpusPerNode-1)
		files[node+"distance"] = strings.Join(dist, " ")
		files[node+"meminfo"] = fmt.Sprintf("Node %d MemTotal:       %d kB\nNode %d MemFree:        %d kB\n", i, 8<<20, i, free<<10)
	}
	for name, content := range files {
		path := filepath.Join(base, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return "", err
		}
		if err := os.WriteFile(path, []byte(content+"\n"), 0o644); err != nil {
			return "", err
		}
	}
	return dir, nil
}

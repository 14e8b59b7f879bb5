// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package localnode

import (
	"path/filepath"
	"strings"
	"testing"
)

// tomlSections reads the flat TOML the config functions write: each [table] header's
// key = value lines, values as written (strings keep their quotes); top-level keys are
// under "".
func tomlSections(t *testing.T, text string) map[string]map[string]string {
	t.Helper()
	sections := map[string]map[string]string{"": {}}
	cur := ""
	for i, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
		case strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]"):
			cur = strings.TrimSuffix(strings.TrimPrefix(line, "["), "]")
			if _, dup := sections[cur]; dup {
				t.Fatalf("line %d: table [%s] twice", i+1, cur)
			}
			sections[cur] = map[string]string{}
		default:
			k, v, ok := strings.Cut(line, " = ")
			if !ok {
				t.Fatalf("line %d: not key = value: %q", i+1, line)
			}
			sections[cur][k] = v
		}
	}
	return sections
}

// The containerd 2.x config: version 3, NRI on with its socket where Node.NRISocket says,
// its plugin dirs and the opt dir in the node's directory, the shim and runc from the
// runtime dir, and the settings the Debian config has, under their 2.x plugins.
func TestContainerdConfigV3(t *testing.T) {
	dir, rt := "/var/tmp/node", "/cache/runtime/bin"
	node := &Node{Dir: dir, RuntimeDir: rt}
	s := tomlSections(t, ContainerdConfigV3(dir, rt, ContainerdOptions{}))
	const (
		nri     = `plugins."io.containerd.nri.v1.nri"`
		runtime = `plugins."io.containerd.cri.v1.runtime"`
		runc    = runtime + `.containerd.runtimes.runc`
	)
	q := func(p string) string { return `"` + p + `"` }
	want := map[string]map[string]string{
		"":      {"version": "3", "root": q(dir + "/containerd/root"), "state": q(dir + "/containerd/state")},
		"grpc":  {"address": q(node.ContainerdSocket())},
		"ttrpc": {"address": q(node.ContainerdSocket() + ".ttrpc")},
		nri: {
			"disable": "false", "socket_path": q(node.NRISocket()),
			"plugin_path": q(dir + "/nri/plugins"), "plugin_config_path": q(dir + "/nri/conf.d"),
		},
		`plugins."io.containerd.cri.v1.images".pinned_images`: {"sandbox": q(PauseImage)},
		`plugins."io.containerd.cri.v1.images"`:               {"snapshotter": q("overlayfs")},
		runtime:                                               {"restrict_oom_score_adj": "true", "disable_apparmor": "true"},
		runtime + ".cni":                                      {"bin_dirs": `["/usr/lib/cni"]`, "conf_dir": q(dir + "/cni/net.d")},
		runc:                                                  {"runtime_type": q("io.containerd.runc.v2"), "runtime_path": q(rt + "/containerd-shim-runc-v2")},
		runc + ".options":                                     {"BinaryName": q(rt + "/runc"), "SystemdCgroup": "false", "NoPivotRoot": "false"},
		`plugins."io.containerd.grpc.v1.cri"`:                 {"stream_server_address": q("127.0.0.1"), "stream_server_port": q("0")},
		`plugins."io.containerd.internal.v1.opt"`:             {"path": q(dir + "/containerd/opt")},
	}
	for table, kv := range want {
		got, ok := s[table]
		if !ok {
			t.Errorf("no table [%s]", table)
			continue
		}
		for k, v := range kv {
			if got[k] != v {
				t.Errorf("[%s] %s = %s, want %s", table, k, got[k], v)
			}
		}
	}
	if node.NRISocket() != filepath.Join(dir, "nri/nri.sock") {
		t.Errorf("NRISocket() = %q, want it in the node's directory", node.NRISocket())
	}
	for table := range s {
		if strings.Contains(table, "io.containerd.grpc.v1.cri.") {
			t.Errorf("table [%s]: containerd 2.x has the CRI runtime and images under io.containerd.cri.v1.*", table)
		}
	}
}

// The kernel lab's VM runs containerd from an initramfs: the native snapshotter (no overlay
// filesystem in its kernel) and runc without pivot_root, which the root mount refuses.
func TestContainerdConfigV3Options(t *testing.T) {
	s := tomlSections(t, ContainerdConfigV3("/tmp/node", "/kernellab/files", ContainerdOptions{Snapshotter: "native", NoPivotRoot: true}))
	if got := s[`plugins."io.containerd.cri.v1.images"`]["snapshotter"]; got != `"native"` {
		t.Errorf("snapshotter = %s, want \"native\"", got)
	}
	if got := s[`plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options`]["NoPivotRoot"]; got != "true" {
		t.Errorf("NoPivotRoot = %s, want true", got)
	}
}

// Debian's containerd (1.6) keeps its version 2 config, which has no NRI, and a node
// without a runtime dir has no NRI socket.
func TestContainerdConfigDebianHasNoNRI(t *testing.T) {
	s := tomlSections(t, containerdConfig("/var/tmp/node"))
	if s[""]["version"] != "2" {
		t.Errorf("version = %s, want 2", s[""]["version"])
	}
	for table := range s {
		if strings.Contains(table, "nri") {
			t.Errorf("table [%s] in the config of containerd 1.6", table)
		}
	}
	if got := (&Node{Dir: "/var/tmp/node"}).NRISocket(); got != "" {
		t.Errorf("NRISocket() without a runtime dir = %q, want empty", got)
	}
	if got := (&Node{}).runtimeBin("ctr"); got != "ctr" {
		t.Errorf("runtimeBin without a runtime dir = %q, want ctr from PATH", got)
	}
}

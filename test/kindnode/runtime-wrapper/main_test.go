// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestMissing(t *testing.T) {
	// These VMs' bounding set: everything up to CAP_CHECKPOINT_RESTORE but CAP_SYS_RESOURCE.
	if diff := cmp.Diff([]string{"CAP_SYS_RESOURCE"}, Missing(0x000001fffeffffff)); diff != "" {
		t.Errorf("Missing (-want +got):\n%s", diff)
	}
	if got := Missing(0x000001ffffffffff); got != nil {
		t.Errorf("Missing(full set) = %v, want none", got)
	}
}

func TestRewrite(t *testing.T) {
	caps := map[string]any{
		"bounding":  []any{"CAP_CHOWN", "CAP_SYS_RESOURCE"},
		"effective": []any{"CAP_SYS_RESOURCE", "CAP_KILL"},
		"permitted": []any{"CAP_KILL"},
	}
	want := map[string]any{
		"bounding":  []any{"CAP_CHOWN"},
		"effective": []any{"CAP_KILL"},
		"permitted": []any{"CAP_KILL"},
	}
	for name, tc := range map[string]struct {
		args func(dir string) []string
		file string // under dir
		doc  map[string]any
		get  func(map[string]any) any
	}{
		"create with --bundle": {
			args: func(d string) []string {
				return []string{"--root", "/run/x", "--log", "/l", "create", "--bundle", d, "--pid-file", "/p", "id"}
			},
			file: "config.json",
			doc:  map[string]any{"ociVersion": "1.0.2", "process": map[string]any{"capabilities": caps}},
			get:  func(m map[string]any) any { return m["process"].(map[string]any)["capabilities"] },
		},
		"exec with --process=": {
			args: func(d string) []string {
				return []string{"exec", "--process=" + filepath.Join(d, "p.json"), "--detach", "id"}
			},
			file: "p.json",
			doc:  map[string]any{"args": []any{"sh"}, "capabilities": caps},
			get:  func(m map[string]any) any { return m["capabilities"] },
		},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, tc.file)
			data, _ := json.Marshal(tc.doc)
			if err := os.WriteFile(path, data, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := rewrite(tc.args(dir), []string{"CAP_SYS_RESOURCE"}); err != nil {
				t.Fatal(err)
			}
			out, _ := os.ReadFile(path)
			var got map[string]any
			if err := json.Unmarshal(out, &got); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, tc.get(got)); diff != "" {
				t.Errorf("capabilities (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRewriteLeavesOtherCommandsAlone(t *testing.T) {
	for _, args := range [][]string{{"delete", "id"}, {"--root", "/r", "state", "id"}, {"kill", "id", "9"}} {
		if err := rewrite(args, []string{"CAP_SYS_RESOURCE"}); err != nil {
			t.Errorf("rewrite(%v) = %v, want nothing to do", args, err)
		}
	}
}

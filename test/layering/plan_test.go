// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package layering

import (
	"slices"
	"sort"
	"testing"
)

// planAllowed are the only packages of the module that planning (internal/nodeagent/plan)
// may reach, directly or through another: none of them can set a task's node, write the
// ledger or undo, so planning cannot either. internal/numa/mempolicy sets a memory policy
// on the calling thread only (no kernel call sets another task's); planning uses it to
// read and compare containers' policies.
var planAllowed = []string{
	"api/v1alpha1",
	"internal/fsutil",
	"internal/cpuset",
	"internal/numa",
	"internal/numa/mempolicy",
	"internal/nodeagent/cgroups",
	"internal/nodeagent/desire",
	"internal/nodeagent/known",
	// The memory policies a container gets at creation: chosen and read, never set on a
	// task of a container.
	"internal/numa/mempolicy",
	// The kubelet's device allocations (FollowDevices): read, through a cache whose reader
	// the engine gives it.
	"internal/nodeagent/devices",
}

const planPkg = "internal/nodeagent/plan"

// reach is every package of the module pkg imports, directly or through another, in
// the import graph pkgs.
func reach(pkgs map[string][]string, pkg string) []string {
	seen := map[string]bool{}
	var walk func(string)
	walk = func(p string) {
		for _, dep := range pkgs[p] {
			if !seen[dep] {
				seen[dep] = true
				walk(dep)
			}
		}
	}
	walk(pkg)
	out := make([]string, 0, len(seen))
	for p := range seen {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

// beyond is what of reach(pkgs, pkg) allowed does not hold.
func beyond(pkgs map[string][]string, pkg string, allowed []string) []string {
	var out []string
	for _, dep := range reach(pkgs, pkg) {
		if !slices.Contains(allowed, dep) {
			out = append(out, dep)
		}
	}
	return out
}

// Planning reaches none of the module's packages but the allowed ones.
func TestPlanningCannotAct(t *testing.T) {
	pkgs := modulePackages(t, moduleRoot(t))
	if _, ok := pkgs[planPkg]; !ok {
		t.Fatalf("package %s not found (found %d packages)", planPkg, len(pkgs))
	}
	for _, dep := range beyond(pkgs, planPkg, planAllowed) {
		t.Errorf("%s reaches %s: planning may import only %v", planPkg, dep, planAllowed)
	}
}

// The check itself, on made-up graphs: a package reached through another is found, and
// the ledger, the engine or the kernel's SET reached in any way is refused.
func TestBeyond(t *testing.T) {
	base := map[string][]string{
		"internal/nodeagent/desire":  {"api/v1alpha1", "internal/nodeagent/cgroups", "internal/numa"},
		"internal/nodeagent/cgroups": {"internal/fsutil", "internal/numa"},
		"internal/nodeagent/known":   {"internal/nodeagent/cgroups", "internal/nodeagent/desire"},
		"internal/nodeagent/ledger":  {"internal/nodeagent/known", "internal/fsutil"},
		"internal/numa":              {"internal/fsutil"},
	}
	for name, c := range map[string]struct {
		imports []string
		want    []string
	}{
		"the allowed ones":           {imports: []string{"internal/nodeagent/known", "internal/numa"}},
		"the ledger":                 {imports: []string{"internal/nodeagent/ledger"}, want: []string{"internal/nodeagent/ledger"}},
		"the ledger through another": {imports: []string{"internal/nodeagent/known", "internal/x"}, want: []string{"internal/nodeagent/ledger", "internal/x"}},
		"the engine":                 {imports: []string{"internal/nodeagent"}, want: []string{"internal/nodeagent"}},
		"the kernel's SET":           {imports: []string{"internal/numa/prctl"}, want: []string{"internal/numa/prctl"}},
	} {
		pkgs := map[string][]string{planPkg: c.imports, "internal/x": {"internal/nodeagent/ledger"}}
		for p, deps := range base {
			pkgs[p] = deps
		}
		if got := beyond(pkgs, planPkg, planAllowed); !slices.Equal(got, c.want) {
			t.Errorf("%s: beyond = %v, want %v", name, got, c.want)
		}
	}
}

// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

// Package layering checks the import rules docs/development/layout.md states: the production
// packages form layers, cmd → controllers → internal/nodeagent → internal/numa → api, each
// importing only from its own layer or the ones below it; and no production package
// imports the test-only trees (test/, hack/, internal/testutil/). Two rules hold within
// and across layers: the kubectl plugin builds nothing of internal/nodeagent, and package
// numa itself imports neither numa/prctl nor numa/tune, so what imports only numa cannot
// set a task's node or write a sysctl. Test files are exempt.
package layering

import (
	"go/build"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
)

const module = "github.com/numapref/numapref/"

// layers lists every production package prefix, lowest first. A package that matches none
// fails the test: a new package is placed in a layer on purpose.
var layers = [][]string{
	{"api/", "internal/fsutil", "internal/sandbox", "internal/statefile", "internal/statedir", "internal/cpuset", "internal/metrics"},
	{"internal/numa", "internal/numa/prctl", "internal/numa/tune"},
	{"internal/numa/mempolicy", "internal/numa/migrate"},
	{"internal/nodeagent/cgroups", "internal/nodeagent/migration", "internal/nodeagent/devices", "internal/inspect", "internal/serving"},
	{"internal/nodeagent"},
	// One package per process (TestProcessesApart), the signer's, what the processes share,
	// and controllers itself, which only names two of the agent's for cmd/numapref.
	{"controllers/agent", "controllers/summarizer", "controllers/agentcert", "controllers/internal/", "controllers"},
	{"cmd/"},
}

// testOnly are the trees only tests, hack/ and each other may import.
var testOnly = []string{"test/", "hack/", "internal/testutil/"}

// allTags builds every tier's files, so a tier's non-test code is checked too.
var allTags = []string{"linux", "host", "integration", "chart", "kernellab", "e2e"}

func within(pkg, prefix string) bool {
	if strings.HasSuffix(prefix, "/") {
		return strings.HasPrefix(pkg, prefix)
	}
	return pkg == prefix || strings.HasPrefix(pkg, prefix+"/")
}

// layerOf is the index of the layer pkg belongs to (the longest matching prefix), or -1.
func layerOf(pkg string) int {
	layer, longest := -1, 0
	for i, prefixes := range layers {
		for _, p := range prefixes {
			if within(pkg, p) && len(p) > longest {
				layer, longest = i, len(p)
			}
		}
	}
	return layer
}

func isTestOnly(pkg string) bool {
	for _, p := range testOnly {
		if within(pkg, p) {
			return true
		}
	}
	return false
}

// violations returns, for a package at pkg importing the module's packages imports, what
// breaks the rules.
func violations(pkg string, imports []string) []string {
	var out []string
	if isTestOnly(pkg) {
		return nil
	}
	from := layerOf(pkg)
	if from < 0 {
		return []string{pkg + " is in no layer (add it to layers in test/layering)"}
	}
	for _, dep := range imports {
		switch to := layerOf(dep); {
		case isTestOnly(dep):
			out = append(out, pkg+" imports the test-only "+dep)
		case to > from:
			out = append(out, pkg+" imports "+dep+", a higher layer")
		}
	}
	return out
}

// transitive returns the module's packages pkg imports, directly or through others, sorted.
func transitive(pkgs map[string][]string, pkg string) []string {
	seen := map[string]bool{}
	var visit func(string)
	visit = func(p string) {
		for _, dep := range pkgs[p] {
			if !seen[dep] {
				seen[dep] = true
				visit(dep)
			}
		}
	}
	visit(pkg)
	out := make([]string, 0, len(seen))
	for dep := range seen {
		out = append(out, dep)
	}
	sort.Strings(out)
	return out
}

// pluginViolations returns what of the agent the kubectl plugin would build: any package
// under internal/nodeagent among its transitive deps. The plugin decodes the inspect
// endpoint's answers; the agent's engine, cgroup walker and their dependencies have no
// business in a kubectl binary.
func pluginViolations(pkgs map[string][]string) []string {
	var out []string
	for _, dep := range transitive(pkgs, kubectlPlugin) {
		if within(dep, "internal/nodeagent") {
			out = append(out, kubectlPlugin+" builds "+dep)
		}
	}
	return out
}

// numaViolations returns the imports by which package numa itself could set a task's node
// or write a sysctl: numa/prctl and numa/tune import numa, never the other way.
func numaViolations(pkgs map[string][]string) []string {
	var out []string
	for _, dep := range pkgs["internal/numa"] {
		if within(dep, "internal/numa/prctl") || within(dep, "internal/numa/tune") {
			out = append(out, "internal/numa imports "+dep)
		}
	}
	return out
}

// kubectlPlugin is the kubectl plugin's main package.
const kubectlPlugin = "cmd/kubectl-numapref"

// moduleRoot is the directory holding go.mod, above the test's working directory.
func moduleRoot(t *testing.T) string {
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the working directory")
		}
		dir = parent
	}
}

// modulePackages maps every package of the module (relative path) to the module's
// packages its non-test files import.
func modulePackages(t *testing.T, root string) map[string][]string {
	ctx := build.Default
	ctx.GOOS, ctx.BuildTags, ctx.CgoEnabled = "linux", allTags, true
	pkgs := map[string][]string{}
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		name := d.Name()
		if path != root && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata" || name == "node_modules") {
			return filepath.SkipDir
		}
		bp, err := ctx.ImportDir(path, 0)
		if err != nil {
			if _, none := err.(*build.NoGoError); none {
				return nil
			}
			return err
		}
		rel, _ := filepath.Rel(root, path)
		var deps []string
		for _, imp := range bp.Imports {
			if strings.HasPrefix(imp, module) {
				deps = append(deps, strings.TrimPrefix(imp, module))
			}
		}
		pkgs[filepath.ToSlash(rel)] = deps
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return pkgs
}

func TestImportsRunOneWay(t *testing.T) {
	pkgs := modulePackages(t, moduleRoot(t))
	for _, must := range []string{"cmd/numapref", "controllers/agent", "controllers/summarizer", "controllers/agentcert", "internal/nodeagent", "internal/numa", "api/v1alpha1"} {
		if _, ok := pkgs[must]; !ok {
			t.Fatalf("package %s not found: the walk is wrong (found %d packages)", must, len(pkgs))
		}
	}
	var bad []string
	for pkg, deps := range pkgs {
		bad = append(bad, violations(pkg, deps)...)
	}
	sort.Strings(bad)
	for _, b := range bad {
		t.Error(b)
	}
}

func TestKubectlPluginBuildsNoAgent(t *testing.T) {
	pkgs := modulePackages(t, moduleRoot(t))
	if deps := transitive(pkgs, kubectlPlugin); !slices.Contains(deps, "internal/inspect") {
		t.Fatalf("%s does not import internal/inspect: the walk is wrong (deps %v)", kubectlPlugin, deps)
	}
	for _, b := range pluginViolations(pkgs) {
		t.Error(b)
	}
}

func TestNumaOnlyReads(t *testing.T) {
	pkgs := modulePackages(t, moduleRoot(t))
	for _, must := range []string{"internal/numa/prctl", "internal/numa/tune"} {
		if !slices.Contains(pkgs[must], "internal/numa") {
			t.Fatalf("%s does not import internal/numa: the walk is wrong (imports %v)", must, pkgs[must])
		}
	}
	for _, b := range numaViolations(pkgs) {
		t.Error(b)
	}
}

// apart lists, for the controllers of one process (or what they share), the packages it
// must not import: the agent's and the summarizer's controllers run in different processes
// and know nothing of each other.
var apart = map[string][]string{
	"controllers/agent":      {"controllers/summarizer"},
	"controllers/summarizer": {"controllers/agent"},
	"controllers/agentcert":  {"controllers/agent", "controllers/summarizer"},
	"controllers/internal/":  {"controllers/agent", "controllers/summarizer", "controllers/agentcert"},
}

// crossings returns what pkg, importing the module's packages imports, imports against
// apart.
func crossings(pkg string, imports []string) []string {
	var out []string
	for from, forbidden := range apart {
		if !within(pkg, from) {
			continue
		}
		for _, dep := range imports {
			for _, f := range forbidden {
				if within(dep, f) {
					out = append(out, pkg+" imports "+dep+": the processes' controllers stay apart")
				}
			}
		}
	}
	return out
}

func TestProcessesApart(t *testing.T) {
	var bad []string
	for pkg, deps := range modulePackages(t, moduleRoot(t)) {
		bad = append(bad, crossings(pkg, deps)...)
	}
	sort.Strings(bad)
	for _, b := range bad {
		t.Error(b)
	}
	for _, c := range []struct {
		pkg     string
		imports []string
		want    int
	}{
		{"controllers/agent", []string{"controllers/agentcert", "controllers/internal/status", "internal/nodeagent/nri"}, 0},
		{"controllers/summarizer", []string{"controllers/agentcert", "controllers/internal/runnable"}, 0},
		{"controllers/agent", []string{"controllers/summarizer"}, 1},
		{"controllers/summarizer", []string{"controllers/agent"}, 1},
		{"controllers/agentcert", []string{"controllers/agent", "controllers/summarizer"}, 2},
		{"controllers/internal/status", []string{"controllers/agent"}, 1},
	} {
		if got := crossings(c.pkg, c.imports); len(got) != c.want {
			t.Errorf("crossings(%s, %v) = %q, want %d", c.pkg, c.imports, got, c.want)
		}
	}
}

// The rules themselves, on made-up graphs: each kind of violation is found.
func TestViolations(t *testing.T) {
	cases := []struct {
		pkg     string
		imports []string
		want    int
	}{
		{"cmd/numapref", []string{"controllers", "internal/nodeagent", "internal/numa/emulator", "api/v1alpha1"}, 0},
		{"internal/nodeagent", []string{"internal/nodeagent/cgroups", "internal/inspect", "internal/numa"}, 0},
		{"internal/numa", []string{"internal/nodeagent"}, 1},
		{"internal/numa", []string{"internal/numa/mempolicy"}, 1},
		{"internal/numa/migrate", []string{"internal/numa", "internal/nodeagent/migration"}, 1},
		{"internal/nodeagent/migration", []string{"internal/numa/migrate", "internal/numa"}, 0},
		{"internal/nodeagent/migration", []string{"internal/nodeagent"}, 1},
		{"internal/numa/emulator", []string{"controllers", "cmd/numapref"}, 2},
		{"controllers", []string{"internal/testutil/testenv"}, 1},
		{"internal/numa/conformance", []string{"internal/testutil/testenv"}, 1},
		{"internal/nodeagent/cgroups", []string{"test/localnode"}, 1},
		{"internal/newthing", nil, 1},
		{"test/e2e", []string{"internal/testutil/testenv", "cmd/numapref"}, 0},
		{"hack/demo", []string{"test/localnode"}, 0},
		{"internal/statedir", []string{"internal/fsutil", "internal/statefile"}, 0},
		{"internal/cpuset", []string{"internal/numa"}, 1},
		{"internal/numa/tune", []string{"internal/numa"}, 0},
		{"internal/numa", []string{"internal/numa/prctl"}, 0}, // a layer's own: numaViolations' rule
	}
	for _, c := range cases {
		if got := violations(c.pkg, c.imports); len(got) != c.want {
			t.Errorf("violations(%s, %v) = %q, want %d", c.pkg, c.imports, got, c.want)
		}
	}
	graphs := []struct {
		name         string
		pkgs         map[string][]string
		plugin, numa int
	}{
		{"as it should be", map[string][]string{
			kubectlPlugin:         {"internal/inspect"},
			"internal/inspect":    {"internal/cpuset"},
			"internal/numa/prctl": {"internal/numa"},
		}, 0, 0},
		{"the plugin through inspect", map[string][]string{
			kubectlPlugin:                {"internal/inspect"},
			"internal/inspect":           {"internal/nodeagent/cgroups"},
			"internal/nodeagent/cgroups": {"internal/numa"},
		}, 1, 0},
		{"numa imports what sets", map[string][]string{
			"internal/numa":       {"internal/numa/prctl", "internal/numa/tune", "internal/numa/emulator"},
			"internal/numa/prctl": {"internal/numa"},
		}, 0, 2},
	}
	for _, g := range graphs {
		if got := pluginViolations(g.pkgs); len(got) != g.plugin {
			t.Errorf("%s: pluginViolations = %q, want %d", g.name, got, g.plugin)
		}
		if got := numaViolations(g.pkgs); len(got) != g.numa {
			t.Errorf("%s: numaViolations = %q, want %d", g.name, got, g.numa)
		}
	}
}

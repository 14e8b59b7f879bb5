// Package layering checks the import rules the README's layout states: the production
// packages form layers, cmd → controllers → internal/nodeagent → internal/numa → api, each
// importing only from its own layer or the ones below it; and no production package
// imports the test-only trees (test/, hack/, internal/testutil/). Test files are exempt.
package layering

import (
	"go/build"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

const module = "github.com/numapref/numapref/"

// layers lists every production package prefix, lowest first. A package that matches none
// fails the test: a new package is placed in a layer on purpose.
var layers = [][]string{
	{"api/", "internal/fsutil", "internal/sandbox"},
	{"internal/numa"},
	{"internal/nodeagent/cgroups", "internal/inspect", "internal/serving"},
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
		{"internal/numa/emulator", []string{"controllers", "cmd/numapref"}, 2},
		{"controllers", []string{"internal/testutil/testenv"}, 1},
		{"internal/numa/conformance", []string{"internal/testutil/testenv"}, 1},
		{"internal/nodeagent/cgroups", []string{"test/localnode"}, 1},
		{"internal/newthing", nil, 1},
		{"test/e2e", []string{"internal/testutil/testenv", "cmd/numapref"}, 0},
		{"hack/demo", []string{"test/localnode"}, 0},
	}
	for _, c := range cases {
		if got := violations(c.pkg, c.imports); len(got) != c.want {
			t.Errorf("violations(%s, %v) = %q, want %d", c.pkg, c.imports, got, c.want)
		}
	}
}

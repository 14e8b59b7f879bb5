// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package v1alpha1

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"strconv"
	"strings"
	"testing"
)

// reasonConstants parses this package's Go files and returns every exported string
// constant named Reason..., by name, whatever file declares it.
func reasonConstants(t *testing.T) map[string]string {
	t.Helper()
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatalf("listing the package: %v", err)
	}
	out := map[string]string{}
	fset := token.NewFileSet()
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatalf("parsing %s: %v", name, err)
		}
		for _, decl := range f.Decls {
			gen, ok := decl.(*ast.GenDecl)
			if !ok || gen.Tok != token.CONST {
				continue
			}
			for _, spec := range gen.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, id := range vs.Names {
					if !strings.HasPrefix(id.Name, "Reason") || i >= len(vs.Values) {
						continue
					}
					lit, ok := vs.Values[i].(*ast.BasicLit)
					if !ok || lit.Kind != token.STRING {
						t.Errorf("%s: constant %s is not a string literal; this test cannot read it", name, id.Name)
						continue
					}
					value, err := strconv.Unquote(lit.Value)
					if err != nil {
						t.Fatalf("%s: unquoting %s: %v", name, id.Name, err)
					}
					out[id.Name] = value
				}
			}
		}
	}
	return out
}

// TestEveryReasonHasARow keeps the table and the constants in step: a reason added in one
// place only fails here.
func TestEveryReasonHasARow(t *testing.T) {
	consts := reasonConstants(t)
	if len(consts) == 0 {
		t.Fatal("found no Reason constants: the parser missed them")
	}
	declared := map[string]bool{}
	for name, value := range consts {
		declared[value] = true
		if name != "Reason"+value {
			t.Errorf("constant %s = %q: a reason's constant is Reason + its value", name, value)
		}
		if _, ok := reasonTable[value]; !ok {
			t.Errorf("constant %s (%q) has no row in reasonTable (reasons.go): say whether it is a problem, ineffective, a conflict, a Warning, and what it means", name, value)
		}
	}
	for reason := range reasonTable {
		if !declared[reason] {
			t.Errorf("reasonTable has a row for %q, which no Reason constant declares", reason)
		}
	}
}

func TestReasonRowsAreConsistent(t *testing.T) {
	for reason, info := range reasonTable {
		if info.Meaning == "" {
			t.Errorf("%s: no meaning", reason)
		}
		if info.Conflict && (info.Problem || info.Ineffective || info.Warning) {
			t.Errorf("%s: a conflict feeds the Conflict condition and a Normal Event only, got %+v", reason, info)
		}
		if info.Ineffective && !info.Problem {
			t.Errorf("%s: an ineffective container counts as a problem of its node, got %+v", reason, info)
		}
	}
}

func TestLookupReason(t *testing.T) {
	if got := LookupReason(ReasonMemoryPinnedElsewhere); !got.Problem || !got.Warning || got.Ineffective || got.Conflict {
		t.Errorf("MemoryPinnedElsewhere: got %+v, want a problem with a Warning", got)
	}
	if got := LookupReason(ReasonContainerNotRunning); got.Problem || got.Warning || got.Conflict {
		t.Errorf("ContainerNotRunning: got %+v, want a wait, neither a problem nor a Warning", got)
	}
	if got := LookupReason("SomethingNew"); !got.Problem || !got.Warning {
		t.Errorf("an unknown reason: got %+v, want a problem with a Warning, so it is not hidden", got)
	}
}

func TestKnownReason(t *testing.T) {
	for _, reason := range []string{ReasonApplied, ReasonInvalidReport, ReasonNumaBalancingDisabled} {
		if !KnownReason(reason) {
			t.Errorf("KnownReason(%q) = false, want true: it has a row", reason)
		}
	}
	for _, reason := range []string{"", "x y", "SomethingNew", "applied"} {
		if KnownReason(reason) {
			t.Errorf("KnownReason(%q) = true, want false: it has no row", reason)
		}
	}
}

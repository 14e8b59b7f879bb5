package nodeagent

import (
	"go/ast"
	"go/parser"
	"go/token"
	"testing"
)

// Planning only decides: no planning file calls a SET, an undo or a ledger write. (Its
// kernel is a numa.PreferredNodeReader, so a SET would not compile; this also catches the
// engine's own acting methods, which the planner could reach only by holding an Engine.)
func TestPlanningFilesNeverAct(t *testing.T) {
	acts := map[string]bool{"Set": true, "undo": true, "saveLedger": true, "record": true, "apply": true,
		"applySets": true, "writeAheadAndSet": true, "putBack": true, "saveChoices": true, "startSets": true}
	for _, file := range []string{"plan.go", "placement.go"} {
		f, err := parser.ParseFile(token.NewFileSet(), file, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if call, ok := n.(*ast.CallExpr); ok {
				if sel, ok := call.Fun.(*ast.SelectorExpr); ok && acts[sel.Sel.Name] {
					t.Errorf("%s calls %s: planning must only read", file, sel.Sel.Name)
				}
			}
			return true
		})
	}
}

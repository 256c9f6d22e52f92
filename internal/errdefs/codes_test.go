package errdefs_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kerneld/kerneld/internal/errdefs"
)

// TestCodesAreDistinct: every code is named once, as a snake_case word,
// and is either answered or internal, not both.
func TestCodesAreDistinct(t *testing.T) {
	seen := map[errdefs.Code]bool{}
	for _, c := range slices.Concat(errdefs.Answered, errdefs.Internal) {
		if seen[c] {
			t.Errorf("code %q is listed twice", c)
		}
		seen[c] = true
		if c == "" || strings.Trim(string(c), "abcdefghijklmnopqrstuvwxyz_") != "" {
			t.Errorf("code %q is not snake_case", c)
		}
	}
	if !slices.IsSorted(errdefs.Answered) || !slices.IsSorted(errdefs.Internal) {
		t.Error("Answered and Internal must be sorted")
	}
}

// TestNoBareCodes: no code outside this package is spelled as a string
// where a Code goes: as the code of errdefs.New (or httpapi's
// newProblem), or compared or switched on against CodeOf. A code spelled
// twice drifts; a constant cannot.
func TestNoBareCodes(t *testing.T) {
	root := filepath.Join("..", "..")
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "node_modules" || d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) && path != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if lit := bareCode(n); lit != nil {
				t.Errorf("%s: code %s spelled as a string; use its errdefs constant", fset.Position(lit.Pos()), lit.Value)
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// bareCode returns the string literal n uses as a code, if it does.
func bareCode(n ast.Node) *ast.BasicLit {
	switch n := n.(type) {
	case *ast.CallExpr:
		if (calls(n, "New") || calls(n, "newProblem")) && len(n.Args) > 1 {
			return stringLit(n.Args[1])
		}
	case *ast.BinaryExpr:
		if n.Op == token.EQL || n.Op == token.NEQ {
			if isCodeOf(n.X) {
				return stringLit(n.Y)
			}
			if isCodeOf(n.Y) {
				return stringLit(n.X)
			}
		}
	case *ast.SwitchStmt:
		if !isCodeOf(n.Tag) {
			return nil
		}
		for _, s := range n.Body.List {
			for _, e := range s.(*ast.CaseClause).List {
				if lit := stringLit(e); lit != nil {
					return lit
				}
			}
		}
	}
	return nil
}

// calls reports whether c calls a function or method named name.
func calls(c *ast.CallExpr, name string) bool {
	switch fn := c.Fun.(type) {
	case *ast.Ident:
		return fn.Name == name
	case *ast.SelectorExpr:
		return fn.Sel.Name == name && fmtIdent(fn.X) == "errdefs"
	}
	return false
}

func fmtIdent(e ast.Expr) string {
	if id, ok := e.(*ast.Ident); ok {
		return id.Name
	}
	return ""
}

func isCodeOf(e ast.Expr) bool {
	c, ok := e.(*ast.CallExpr)
	return ok && calls(c, "CodeOf")
}

func stringLit(e ast.Expr) *ast.BasicLit {
	if lit, ok := e.(*ast.BasicLit); ok && lit.Kind == token.STRING {
		return lit
	}
	return nil
}

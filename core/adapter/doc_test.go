package adapter_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The package documentation names every adapter of the module: each
// package that builds its middleware with adapter.Build.
func TestDocNamesEveryAdapter(t *testing.T) {
	fset := token.NewFileSet()
	doc, err := parser.ParseFile(fset, "doc.go", nil, parser.ParseComments|parser.PackageClauseOnly)
	if err != nil {
		t.Fatal(err)
	}
	text := doc.Doc.Text()
	dirs, err := os.ReadDir(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	var adapters []string
	for _, d := range dirs {
		if d.IsDir() && builds(t, fset, filepath.Join("..", "..", d.Name())) {
			adapters = append(adapters, d.Name())
		}
	}
	if len(adapters) < 7 {
		t.Fatalf("found the adapters %q: the test misses some", adapters)
	}
	for _, a := range adapters {
		if !regexp.MustCompile(`\b` + a + `\b`).MatchString(text) {
			t.Errorf("the package documentation does not name adapter %s", a)
		}
	}
}

// builds reports whether the package in dir calls adapter.Build outside
// its tests.
func builds(t *testing.T, fset *token.FileSet, dir string) bool {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		found := false
		ast.Inspect(file, func(n ast.Node) bool {
			if sel, ok := n.(*ast.SelectorExpr); ok && sel.Sel.Name == "Build" {
				if id, ok := sel.X.(*ast.Ident); ok && id.Name == "adapter" {
					found = true
				}
			}
			return !found
		})
		if found {
			return true
		}
	}
	return false
}

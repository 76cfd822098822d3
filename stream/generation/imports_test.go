package generation

import (
	"go/parser"
	"go/token"
	"os"
	"strconv"
	"strings"
	"testing"
)

// TestImportsStayBelowTheCore: the core imports this package, so its
// non-test code may import only the standard library, objectstore itself
// and internal/... (internal/lint's TestDependencyDirection covers the
// repository-wide rules; this one is specific to the package's position).
func TestImportsStayBelowTheCore(t *testing.T) {
	const module = "github.com/nereusstream/nereus-go/"
	files, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	checked := 0
	for _, fi := range files {
		name := fi.Name()
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		checked++
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			rel, ours := strings.CutPrefix(path, module)
			if ours && rel != "objectstore" && !strings.HasPrefix(rel, "internal/") {
				t.Errorf("%s imports %s: stream/generation may import only objectstore and internal/... from this module", name, path)
			}
		}
	}
	if checked == 0 {
		t.Fatal("no source files checked")
	}
}

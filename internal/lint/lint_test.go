package lint

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
)

const modulePath = "github.com/nereusstream/nereus-go"

// goFile is one parsed Go file of the main module.
type goFile struct {
	rel  string // slash path relative to the module root
	dir  string // slash dir relative to the module root ("." for the root)
	test bool
	ast  *ast.File
}

var (
	fset      = token.NewFileSet()
	parsed    []goFile
	parseErrs []string
)

func moduleRoot(t *testing.T) string {
	t.Helper()
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
			t.Fatal("no go.mod above the test directory")
		}
		dir = parent
	}
}

// files parses every .go file of the main module once: nested modules
// (tools/), testdata, hidden and underscore directories are skipped, as the
// go command skips them.
func files(t *testing.T) []goFile {
	t.Helper()
	if parsed != nil || parseErrs != nil {
		if len(parseErrs) > 0 {
			t.Fatalf("parse errors:\n%s", strings.Join(parseErrs, "\n"))
		}
		return parsed
	}
	root := moduleRoot(t)
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path == root {
				return nil
			}
			if name == "testdata" || name == "vendor" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
				return filepath.SkipDir // a nested module (tools/)
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ParseComments|parser.SkipObjectResolution)
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if err != nil {
			parseErrs = append(parseErrs, err.Error())
			return nil
		}
		parsed = append(parsed, goFile{rel: rel, dir: filepath.ToSlash(filepath.Dir(rel)), test: strings.HasSuffix(name, "_test.go"), ast: f})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(parseErrs) > 0 {
		t.Fatalf("parse errors:\n%s", strings.Join(parseErrs, "\n"))
	}
	if len(parsed) == 0 {
		t.Fatal("found no Go files")
	}
	return parsed
}

// underAny reports whether the slash dir is one of the roots or below one.
func underAny(dir string, roots ...string) bool {
	for _, r := range roots {
		if dir == r || strings.HasPrefix(dir, r+"/") {
			return true
		}
	}
	return false
}

// TestPackageDocs: every package has a doc comment on its package clause in
// some non-test file, and a library package's doc starts "Package <name>".
func TestPackageDocs(t *testing.T) {
	type pkg struct {
		name   string
		doc    string
		hasSrc bool
	}
	pkgs := map[string]*pkg{}
	for _, f := range files(t) {
		if f.test {
			continue
		}
		p := pkgs[f.dir]
		if p == nil {
			p = &pkg{name: f.ast.Name.Name}
			pkgs[f.dir] = p
		}
		p.hasSrc = true
		if f.ast.Doc != nil && p.doc == "" {
			p.doc = f.ast.Doc.Text()
		}
	}
	dirs := make([]string, 0, len(pkgs))
	for d := range pkgs {
		dirs = append(dirs, d)
	}
	sort.Strings(dirs)
	for _, d := range dirs {
		p := pkgs[d]
		switch {
		case strings.TrimSpace(p.doc) == "":
			t.Errorf("%s: package %s has no package doc comment: add a doc.go saying what the package owns and what it must never do", d, p.name)
		case p.name != "main" && !strings.HasPrefix(p.doc, "Package "+p.name+" "):
			t.Errorf("%s: package doc should start with %q, starts with %q", d, "Package "+p.name+" ", firstLine(p.doc))
		}
	}
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}

// forbiddenImport describes one dependency-direction rule.
type forbiddenImport struct {
	// from: directories the rule applies to.
	from []string
	// to: module-relative package roots they must not import.
	to []string
	// exceptFrom: directories exempt from the rule.
	exceptFrom []string
	// exceptTo: targets under `to` the rule allows.
	exceptTo []string
	// nonTestOnly: the rule ignores _test.go files.
	nonTestOnly bool
	// exceptFiles: single test files of an external test package
	// (package x_test) allowed to break the rule, each for a reason given
	// where it is listed. Production code never is.
	exceptFiles []string
	why         string
}

var importRules = []forbiddenImport{
	{
		from: []string{"stream", "metadata", "objectstore", "wal"},
		to:   []string{"kafka", "pulsar", "managedledger", "server", "cmd", "cluster"},
		// The managedledger simulation is package stream_test: it drives
		// the Pulsar storage boundary on the simulated world
		// (stream.SimCluster, a test-only export), which exists only in
		// stream's test binary. Package stream itself, its internal tests
		// and every production file still never import upward.
		// The kstore simulation likewise (the Kafka storage boundary, and
		// cluster only for its NotOwnerError and Broker types in the
		// simulated membership that replaces *cluster.Node).
		exceptFiles: []string{"stream/sim_managedledger_test.go", "stream/sim_kstore_test.go", "stream/sim_kstore_cluster_test.go"},
		why:         "the storage layers sit below the cluster, the protocol adapters, the storage boundaries and the server (docs/ARCHITECTURE.md); nothing imports upward",
	},
	{
		from:        []string{"cluster"},
		to:          []string{"kafka", "pulsar", "managedledger", "server", "cmd", "adminapi"},
		nonTestOnly: true,
		why:         "cluster sits between the stream core and the protocol front ends: it decides ownership, never protocol semantics",
	},
	{
		from:        []string{"stream", "metadata", "objectstore", "wal"},
		to:          []string{"adminapi"},
		nonTestOnly: true,
		why:         "adminapi is the admin REST contract served by the server; storage code must not depend on it",
	},
	{
		from:        []string{"."},
		to:          []string{"server"},
		exceptFrom:  []string{"server", "cmd"},
		nonTestOnly: true,
		why:         "server is process wiring: only cmd/nereus may import it (tests may start it in-process)",
	},
	{
		from:       []string{"."},
		to:         []string{"cmd"},
		exceptFrom: []string{"cmd"},
		why:        "commands are leaves",
	},
	{
		from:        []string{"managedledger"},
		to:          []string{"kafka", "pulsar", "kop"},
		nonTestOnly: true,
		why:         "the Pulsar storage boundary sits below the protocol adapters and the KoP projection",
	},
	{
		from:        []string{"kafka/kstore"},
		to:          []string{"pulsar", "managedledger", "kop"},
		nonTestOnly: true,
		why:         "the Kafka storage boundary reaches projected topics only through its Projection interface",
	},
	{
		from:        []string{"kop"},
		to:          []string{"pulsar", "kafka"},
		exceptTo:    []string{"pulsar/wire", "pulsar/pb", "kafka/kbatch", "kafka/kstore"},
		nonTestOnly: true,
		why:         "KoP projects through the Pulsar storage boundary (managedledger); it may use the codecs (pulsar/wire, pulsar/pb, kafka/kbatch) and kstore's interface, never the brokers",
	},
	{
		from:        []string{"kafka", "pulsar"},
		to:          []string{"kop"},
		nonTestOnly: true,
		why:         "the front ends get the KoP projection through kstore.Projection, wired by the server",
	},
	{
		from:        []string{"pulsar"},
		to:          []string{"kafka"},
		nonTestOnly: true,
		why:         "the Pulsar and Kafka front ends are separate protocol paths",
	},
	{
		from:        []string{"kafka"},
		to:          []string{"pulsar", "managedledger"},
		nonTestOnly: true,
		why:         "the Kafka front end reaches Pulsar topics only through kstore.Projection",
	},
}

func TestDependencyDirection(t *testing.T) {
	for _, f := range files(t) {
		for _, imp := range f.ast.Imports {
			path, err := strconv.Unquote(imp.Path.Value)
			if err != nil || !strings.HasPrefix(path, modulePath+"/") {
				continue
			}
			target := strings.TrimPrefix(path, modulePath+"/")
			for _, r := range importRules {
				if r.nonTestOnly && f.test {
					continue
				}
				if f.test && strings.HasSuffix(f.ast.Name.Name, "_test") && slices.Contains(r.exceptFiles, f.rel) {
					continue
				}
				applies := false
				for _, from := range r.from {
					if from == "." || underAny(f.dir, from) {
						applies = true
					}
				}
				if !applies || underAny(f.dir, r.exceptFrom...) {
					continue
				}
				if underAny(target, r.to...) && !underAny(target, r.exceptTo...) {
					t.Errorf("%s imports %s: %s", f.rel, path, r.why)
				}
			}
		}
	}
}

// TestNoPrintInLibraries: library packages (not main, not tests) never
// write to stdout with fmt.Print/Printf/Println or the print builtins; they
// log through log/slog or return values.
func TestNoPrintInLibraries(t *testing.T) {
	for _, f := range files(t) {
		if f.test || f.ast.Name.Name == "main" {
			continue
		}
		fmtName := ""
		for _, imp := range f.ast.Imports {
			if imp.Path.Value == `"fmt"` {
				fmtName = "fmt"
				if imp.Name != nil {
					fmtName = imp.Name.Name
				}
			}
		}
		ast.Inspect(f.ast, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			switch fn := call.Fun.(type) {
			case *ast.SelectorExpr:
				if x, ok := fn.X.(*ast.Ident); ok && fmtName != "" && x.Name == fmtName {
					switch fn.Sel.Name {
					case "Print", "Printf", "Println":
						t.Errorf("%s:%d: fmt.%s in a library package: log with log/slog or return the value",
							f.rel, lineOf(call), fn.Sel.Name)
					}
				}
			case *ast.Ident:
				if fn.Name == "print" || fn.Name == "println" {
					t.Errorf("%s:%d: builtin %s in a library package", f.rel, lineOf(call), fn.Name)
				}
			}
			return true
		})
	}
}

// TestSkipsGoThroughTestenv: a test that cannot run because something in
// its environment is missing ends through testenv.SkipOrFail, so
// NEREUS_REQUIRE_EXTERNAL=1 (CI) turns the skip into a failure. Any other
// Skip/Skipf/SkipNow call must say on its line (or the line above) why it
// is not an environment skip: "// skip-ok: <reason>".
func TestSkipsGoThroughTestenv(t *testing.T) {
	for _, f := range files(t) {
		if f.rel == "internal/testenv/testenv.go" {
			continue // SkipOrFail itself
		}
		okLines := map[int]bool{}
		for _, cg := range f.ast.Comments {
			for _, c := range cg.List {
				if strings.HasPrefix(strings.TrimSpace(strings.TrimPrefix(c.Text, "//")), "skip-ok:") {
					okLines[lineOf(c)] = true
				}
			}
		}
		ast.Inspect(f.ast, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			switch sel.Sel.Name {
			case "Skip", "Skipf", "SkipNow":
				if line := lineOf(call); !okLines[line] && !okLines[line-1] {
					t.Errorf("%s:%d: %s: an environment skip must be testenv.SkipOrFail (fails under NEREUS_REQUIRE_EXTERNAL=1); "+
						"any other skip needs a \"// skip-ok: <reason>\" comment", f.rel, line, sel.Sel.Name)
				}
			}
			return true
		})
	}
}

func lineOf(n ast.Node) int { return fset.Position(n.Pos()).Line }

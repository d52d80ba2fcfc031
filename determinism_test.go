package rocesim_test

import (
	"encoding/json"
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// deterministic lists the packages that must behave identically on every
// run with the same seed (../shared/STYLE.md, "Determinism contract"):
// the simulation engine, the fabric, fault plans and the NIC model, and
// every package that drives the event loop (verbs owns the world and runs
// it; scenario and verbs/verbstest run worlds) or draws what it did
// (ladder: the same trace gives the same bytes). A listed package that is
// missing (moved, renamed) fails the test: the list names what is checked.
var deterministic = []string{"sim", "sim/fabric", "faults", "nic", "verbs", "scenario", "verbs/verbstest", "ladder", "rdmacm"}

// wallClockAllowed names the functions of a deterministic package
// ("package.function", methods by their name) that may read the wall
// clock, and why. Nothing a run does may depend on it: only a bound that
// ends a runaway run with a failure.
var wallClockAllowed = map[string]string{
	"verbs/verbstest.runUntil": "the watchdog: a world still busy after a wall-time bound fails its test; it never changes what a run does",
}

// forbiddenCalls are functions that read the wall clock, sleep, or draw
// from a global random source.
var forbiddenCalls = map[string]string{
	"time.Now": "reads the wall clock", "time.Since": "reads the wall clock", "time.Until": "reads the wall clock",
	"time.Sleep": "sleeps on the wall clock", "time.After": "waits on the wall clock", "time.Tick": "waits on the wall clock",
	"time.NewTimer": "waits on the wall clock", "time.NewTicker": "waits on the wall clock", "time.AfterFunc": "waits on the wall clock",
}

// TestDeterminismRules type-checks the deterministic packages and rejects
// goroutines, channels, the wall clock, global randomness, math/rand (v1)
// and ranging over maps (whose order is random; iterate sorted keys).
func TestDeterminismRules(t *testing.T) {
	exports := exportData(t)
	imp := importer.ForCompiler(token.NewFileSet(), "gc", func(path string) (io.ReadCloser, error) {
		f, ok := exports[path]
		if !ok {
			return nil, fmt.Errorf("no export data for %s", path)
		}
		return os.Open(f)
	})
	checked := 0
	for _, rel := range deterministic {
		dir := filepath.FromSlash(rel)
		files, _ := filepath.Glob(filepath.Join(dir, "*.go"))
		fset := token.NewFileSet()
		var parsed []*ast.File
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			af, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			parsed = append(parsed, af)
		}
		if len(parsed) == 0 {
			t.Errorf("deterministic package %s has no Go files in %s: it moved or was renamed; update the list", rel, dir)
			continue
		}
		info := &types.Info{Types: map[ast.Expr]types.TypeAndValue{}, Uses: map[*ast.Ident]types.Object{}}
		conf := types.Config{Importer: imp}
		if _, err := conf.Check(module+"/"+rel, fset, parsed, info); err != nil {
			t.Fatalf("type-checking %s: %v", rel, err)
		}
		for _, af := range parsed {
			for _, is := range af.Imports {
				if p := strings.Trim(is.Path.Value, `"`); p == "math/rand" {
					t.Errorf("%s: imports math/rand; use the seeded math/rand/v2 stream passed in", fset.Position(is.Pos()))
				}
			}
			for _, decl := range af.Decls {
				fn := ""
				if fd, ok := decl.(*ast.FuncDecl); ok {
					fn = fd.Name.Name
				}
				checkDecl(t, fset, info, decl, rel+"."+fn)
			}
		}
		checked++
	}
	if checked != len(deterministic) {
		t.Fatalf("checked %d of the %d deterministic packages", checked, len(deterministic))
	}
}

// checkDecl reports what a declaration does against the rules of
// TestDeterminismRules; where is "package.function" (for wallClockAllowed),
// or "package." outside functions.
func checkDecl(t *testing.T, fset *token.FileSet, info *types.Info, decl ast.Decl, where string) {
	t.Helper()
	ast.Inspect(decl, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.GoStmt:
			t.Errorf("%s: go statement: no goroutines in a deterministic package", fset.Position(n.Pos()))
		case *ast.ChanType:
			t.Errorf("%s: channel type: no concurrency in a deterministic package", fset.Position(n.Pos()))
		case *ast.RangeStmt:
			if tv, ok := info.Types[n.X]; ok {
				if _, isMap := tv.Type.Underlying().(*types.Map); isMap {
					t.Errorf("%s: range over a map: its order is random; range over sorted keys or a slice", fset.Position(n.Pos()))
				}
			}
		case *ast.SelectorExpr:
			obj, ok := info.Uses[n.Sel]
			if !ok {
				return true
			}
			fn, ok := obj.(*types.Func)
			if !ok || fn.Pkg() == nil || fn.Type().(*types.Signature).Recv() != nil {
				return true
			}
			name := fn.Pkg().Path() + "." + fn.Name()
			if why, bad := forbiddenCalls[name]; bad && wallClockAllowed[where] == "" {
				t.Errorf("%s: %s %s", fset.Position(n.Pos()), name, why)
			}
			if fn.Pkg().Path() == "math/rand/v2" && !strings.HasPrefix(fn.Name(), "New") {
				t.Errorf("%s: %s draws from the global random source; use the seeded stream passed in", fset.Position(n.Pos()), name)
			}
		}
		return true
	})
}

// exportData maps import paths to compiled export data for everything the
// module's packages depend on.
func exportData(t *testing.T) map[string]string {
	t.Helper()
	cmd := exec.Command("go", "list", "-export", "-deps", "-json=ImportPath,Export", "./...")
	out, err := cmd.Output()
	if err != nil {
		msg := ""
		if ee, ok := err.(*exec.ExitError); ok {
			msg = string(ee.Stderr)
		}
		t.Fatalf("go list -export: %v\n%s", err, msg)
	}
	m := map[string]string{}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for dec.More() {
		var p struct{ ImportPath, Export string }
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		if p.Export != "" {
			m[p.ImportPath] = p.Export
		}
	}
	return m
}

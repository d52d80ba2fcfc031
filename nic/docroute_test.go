package nic

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// routeStep matches "dir/file.go (*Type).Method" in doc.go's route of a
// SEND; a bare "file.go" is in the directory of the step before it.
var routeStep = regexp.MustCompile(`([\w/]*\w+\.go)\s+\(\*(\w+)\)\.(\w+)`)

// TestDocRouteExists checks that every method doc.go's "route of one
// SEND" names exists, with that receiver, in the file it names, so the
// route cannot silently go stale when code moves.
func TestDocRouteExists(t *testing.T) {
	doc, err := os.ReadFile("doc.go")
	require.NoError(t, err)
	text := regexp.MustCompile(`\n//\s*`).ReplaceAllString(string(doc), " ") // join the comment's lines
	steps := routeStep.FindAllStringSubmatch(text, -1)
	require.GreaterOrEqual(t, len(steps), 20, "the route names its steps")
	dir := ""
	for _, m := range steps {
		file, recv, name := m[1], m[2], m[3]
		if path.Dir(file) != "." {
			dir = path.Dir(file)
		} else {
			file = path.Join(dir, file)
		}
		assert.True(t, declares(t, "../"+file, recv, name), "%s: no method (*%s).%s", file, recv, name)
	}
}

// declares reports whether the Go file at p declares a method name on
// *recv.
func declares(t *testing.T, p, recv, name string) bool {
	f, err := parser.ParseFile(token.NewFileSet(), p, nil, parser.SkipObjectResolution)
	if !assert.NoError(t, err) {
		return false
	}
	for _, d := range f.Decls {
		fn, ok := d.(*ast.FuncDecl)
		if !ok || fn.Recv == nil || fn.Name.Name != name {
			continue
		}
		if st, ok := fn.Recv.List[0].Type.(*ast.StarExpr); ok {
			if id, ok := st.X.(*ast.Ident); ok && id.Name == recv {
				return true
			}
		}
	}
	return false
}

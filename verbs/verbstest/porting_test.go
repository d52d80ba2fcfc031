package verbstest_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rocesim/rocesim/verbs"
	"github.com/rocesim/rocesim/verbs/verbstest"
)

// TestModifySRQLimit is rdma-core's tests/test_srq.py
// SrqTestCase.test_modify_srq_limit, ported: post 10 receives to the
// server's SRQ, arm its limit at 7, check the limit by a query, send 4
// messages, and the server's context reports IBV_EVENT_SRQ_LIMIT_REACHED.
// (rdma-core connects two QPs to the SRQ; one does here.)
func TestModifySRQLimit(t *testing.T) {
	w := verbstest.New(t, verbstest.Options{Nodes: []string{"client", "server"}})
	client, server := w.Pair("client", "server", verbstest.QPOptions{
		Peer: &verbstest.QPOptions{SRQ: true}, // the server's QP takes its receives from an SRQ
	})
	buf := server.Host.Buffer(10 * 64)
	for i := range 10 {
		server.PostRecv(uint64(i), buf.SGE(uint64(i*64), 64)) // to the SRQ
	}
	err := server.SRQ.Modify(verbs.SRQAttr{SRQLimit: 7}, verbs.SRQAttrLimit)
	require.NoError(t, err)
	attr, err := server.SRQ.Query()
	require.NoError(t, err)
	require.Equal(t, uint32(7), attr.SRQLimit, "Modify SRQ failed")

	msg := client.Host.Buffer(64)
	for i := range 4 {
		_, err := client.QP.PostSend([]verbs.SendWR{{WRID: uint64(i), Opcode: verbs.WRSend,
			Flags: verbs.SendSignaled, SGList: []verbs.SGE{msg.SGE(0, 64)}}})
		require.NoError(t, err)
		w.RequireCompletion(client.CQ, verbs.WCSuccess, verbs.WCSend)
		w.RequireCompletion(server.CQ, verbs.WCSuccess, verbs.WCRecv)
	}
	event, ok := server.Host.Ctx.GetAsyncEvent()
	require.True(t, ok, "no async event")
	require.Equal(t, verbs.EventSRQLimitReached, event.Type)
}

// TestPortingSectionIsARealTest: the code in the README's "Porting a C
// verbs test to verbstest" is TestModifySRQLimit, letter for letter, and
// under 40 lines.
func TestPortingSectionIsARealTest(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	_, section, ok := strings.Cut(string(readme), "\n## Porting a C verbs test to verbstest\n")
	require.True(t, ok, "the README has no section \"Porting a C verbs test to verbstest\"")
	_, block, ok := strings.Cut(section, "\n```go\n")
	require.True(t, ok, "the section has no Go block")
	block, _, ok = strings.Cut(block, "\n```\n")
	require.True(t, ok, "the Go block does not end")

	src, err := os.ReadFile("porting_test.go")
	require.NoError(t, err)
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "porting_test.go", src, parser.ParseComments)
	require.NoError(t, err)
	var code string
	for _, d := range f.Decls {
		if fn, ok := d.(*ast.FuncDecl); ok && fn.Name.Name == "TestModifySRQLimit" {
			code = string(src[fset.Position(fn.Doc.Pos()).Offset:fset.Position(fn.End()).Offset])
		}
	}
	require.Equal(t, code, block, "the README's port and TestModifySRQLimit differ: copy the function into the README")
	body := code[strings.Index(code, "func "):]
	require.Less(t, strings.Count(body, "\n")+1, 40, "the port is meant to be under 40 lines")
}

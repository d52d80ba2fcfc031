package faults

import (
	_ "embed"
	"strings"
)

// docSource is this package's documentation as written (doc.go), the
// one description of the plan's grammar and keys.
//
//go:embed doc.go
var docSource string

// Reference returns the package documentation as plain text: how a plan
// is written, its grammar, what each key matches and what each action
// does, for a command-line tool's help (rocesim help faults) without a
// copy that could drift from the code's own.
func Reference() string {
	var b strings.Builder
	for _, line := range strings.Split(docSource, "\n") {
		if strings.HasPrefix(line, "package ") {
			break
		}
		line, ok := strings.CutPrefix(line, "//")
		if !ok {
			continue
		}
		line = strings.TrimPrefix(line, " ")
		if strings.HasPrefix(line, "\t") {
			line = "    " + line[1:] // a code block, indented as go doc does
		}
		b.WriteString(line)
		b.WriteByte('\n')
	}
	return b.String()
}

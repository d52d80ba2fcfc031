//go:build !linux

package main

import (
	"io"
	"os"
)

// isTerminal reports whether w is a character device, the nearest
// portable sign of a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// terminalWidth returns 0: outside Linux the width comes from COLUMNS or
// the default.
func terminalWidth(io.Writer) int { return 0 }

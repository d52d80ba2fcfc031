package main

import (
	"os"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// openPTY returns the terminal side of a new pseudo-terminal.
func openPTY(t *testing.T) *os.File {
	t.Helper()
	ptm, err := os.OpenFile("/dev/ptmx", os.O_RDWR, 0)
	require.NoError(t, err)
	t.Cleanup(func() { ptm.Close() })
	fd := int(ptm.Fd())
	require.NoError(t, unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0), "unlock pty")
	n, err := unix.IoctlGetInt(fd, unix.TIOCGPTN)
	require.NoError(t, err)
	pts, err := os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|unix.O_NOCTTY, 0)
	require.NoError(t, err)
	t.Cleanup(func() { pts.Close() })
	return pts
}

// TestColorOnlyOnATerminal: the ladder is coloured on a terminal, plain
// into a file, a pipe or /dev/null, and plain on a terminal when
// NO_COLOR is set.
func TestColorOnlyOnATerminal(t *testing.T) {
	env := func(noColor string) func(string) string { return envWith("NO_COLOR", noColor) }
	tty := openPTY(t)
	assert.True(t, useColor(tty, env("")), "a terminal")
	assert.False(t, useColor(tty, env("1")), "a terminal with NO_COLOR=1")
	assert.False(t, useColor(tty, envWith("TERM", "dumb")), "a terminal with TERM=dumb")

	devNull, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	require.NoError(t, err)
	defer devNull.Close()
	assert.False(t, useColor(devNull, env("")), "/dev/null is a character device, not a terminal")

	r, w, err := os.Pipe()
	require.NoError(t, err)
	defer r.Close()
	defer w.Close()
	assert.False(t, useColor(w, env("")), "a pipe")

	f, err := os.Create(t.TempDir() + "/out")
	require.NoError(t, err)
	defer f.Close()
	assert.False(t, useColor(f, env("")), "a file")
}

// TestLadderWidthOfATerminal: on a terminal the ladder takes the
// terminal's width, unless COLUMNS says otherwise.
func TestLadderWidthOfATerminal(t *testing.T) {
	tty := openPTY(t)
	require.NoError(t, unix.IoctlSetWinsize(int(tty.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: 24, Col: 97}))
	assert.Equal(t, 97, ladderWidth(tty, envWith()))
	assert.Equal(t, 120, ladderWidth(tty, envWith("COLUMNS", "120")))
}

package procfabric

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// Errors about the socket and its directory.
var (
	// ErrName: a fabric or node name that is not 1 to 64 of [A-Za-z0-9._-].
	ErrName = errors.New("procfabric: bad name")
	// ErrDirUnsafe: the socket directory exists but another user owns it
	// or others may open it.
	ErrDirUnsafe = errors.New("procfabric: socket directory is not private")
	// ErrRunning: a daemon of that name already runs.
	ErrRunning = errors.New("procfabric: a fabric of that name already runs")
	// ErrNoFabric: no daemon of that name answers.
	ErrNoFabric = errors.New("procfabric: no fabric of that name runs")
)

// checkName checks a fabric or node name: it becomes a file name and a
// capture interface name, so it is kept plain.
func checkName(what, s string) error {
	if len(s) == 0 || len(s) > MaxNodeName || s == "." || s == ".." {
		return fmt.Errorf("%w: %s %q: want 1 to %d characters", ErrName, what, s, MaxNodeName)
	}
	for _, c := range []byte(s) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("%w: %s %q: only letters, digits, '.', '_' and '-'", ErrName, what, s)
		}
	}
	return nil
}

// SocketDir returns the directory fabrics' sockets live in:
// $XDG_RUNTIME_DIR/rocesim if XDG_RUNTIME_DIR is set, else
// /tmp/rocesim-UID.
func SocketDir() string {
	if x := os.Getenv("XDG_RUNTIME_DIR"); x != "" {
		return filepath.Join(x, "rocesim")
	}
	return filepath.Join(os.TempDir(), "rocesim-"+strconv.Itoa(os.Getuid()))
}

// SocketPath returns the socket of the fabric called name in dir ("":
// SocketDir()).
func SocketPath(dir, name string) string {
	if dir == "" {
		dir = SocketDir()
	}
	return filepath.Join(dir, name+".sock")
}

// privateDir creates dir with mode 0700 if it is missing, and checks
// that it is a directory this user owns and nobody else may open: the
// socket's permission bits alone are not honoured everywhere, the
// directory's are.
func privateDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	var st unix.Stat_t
	if err := unix.Lstat(dir, &st); err != nil {
		return &os.PathError{Op: "lstat", Path: dir, Err: err}
	}
	switch {
	case st.Mode&unix.S_IFMT != unix.S_IFDIR:
		return fmt.Errorf("%w: %s is not a directory", ErrDirUnsafe, dir)
	case int(st.Uid) != os.Getuid():
		return fmt.Errorf("%w: %s belongs to uid %d", ErrDirUnsafe, dir, st.Uid)
	case st.Mode&0o077 != 0:
		return fmt.Errorf("%w: %s has mode %#o, want 0700", ErrDirUnsafe, dir, st.Mode&0o777)
	}
	return nil
}

// listen takes the fabric's lock and its socket: a socket left by a
// daemon that died (its lock is free) is removed first.
func listen(dir, name string) (*net.UnixListener, *os.File, error) {
	if err := privateDir(dir); err != nil {
		return nil, nil, err
	}
	lock, err := os.OpenFile(filepath.Join(dir, name+".lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, nil, err
	}
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		lock.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, nil, fmt.Errorf("%w: %s", ErrRunning, SocketPath(dir, name))
		}
		return nil, nil, &os.PathError{Op: "flock", Path: lock.Name(), Err: err}
	}
	path := SocketPath(dir, name)
	if err := os.Remove(path); err != nil && !os.IsNotExist(err) {
		lock.Close()
		return nil, nil, err
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		lock.Close()
		return nil, nil, err
	}
	return ln, lock, nil
}

// peerUID returns the UID of the process at the other end of c.
func peerUID(c *net.UnixConn) (int, error) {
	cred, err := peerCred(c)
	if err != nil {
		return -1, err
	}
	return int(cred.Uid), nil
}

// peerCred returns the credentials of the process at the other end of c
// (SO_PEERCRED): a client's, or, on a client's side, those of the
// process that listens.
func peerCred(c *net.UnixConn) (*unix.Ucred, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return nil, err
	}
	var cred *unix.Ucred
	var serr error
	err = raw.Control(func(fd uintptr) {
		cred, serr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	})
	if err == nil {
		err = serr
	}
	return cred, err
}

// dial connects to the fabric called name in dir.
func dial(dir, name string) (*net.UnixConn, error) {
	c, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: SocketPath(dir, name), Net: "unix"})
	if err != nil {
		if errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ECONNREFUSED) {
			return nil, fmt.Errorf("%w: %s: %v", ErrNoFabric, name, err)
		}
		return nil, err
	}
	return c, nil
}

package conformance

// Flow of a boot:
//   1. Prepare finds the kernel that install.sh unpacked into the cache and,
//      once per kernel, writes beside it an uncompressed ELF vmlinux (PVH
//      entry: about twice as fast as the bzImage under TCG), builds the
//      verbs agent (agent/agent.c) with the host's cc against libibverbs,
//      and writes the base initramfs (busybox, rdma-core userland and the
//      agent with their shared libraries, the rdma_rxe and virtio_net
//      modules in load order, our /init).
//   2. Boot appends a second cpio archive holding /cmd.sh to the base
//      initramfs and starts qemu-system-x86_64 under TCG with the serial
//      console on stdout and eth0 carried as UDP datagrams on 127.0.0.1.
//   3. In the guest, /init loads the modules, brings eth0 up with the given
//      IPv4 address, adds rxe0 on it, finds the RoCE v2 GID of that address,
//      prints the READY marker, runs /cmd.sh, prints its exit status and
//      powers off.
//   4. Wait collects the console output and the exit status.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Console markers printed by the guest's /init.
const (
	markerReady = "ROCESIM-RXE: READY"
	markerExit  = "ROCESIM-RXE: EXIT="
)

// ErrNotInstalled is returned when a host tool or the cached kernel that
// conformance/install.sh provides is missing.
var ErrNotInstalled = errors.New("conformance: host not prepared (run conformance/install.sh)")

// ErrNoExitStatus is returned by Wait when the guest powered off (or was
// killed) without printing the exit status of its command.
var ErrNoExitStatus = errors.New("conformance: guest printed no exit status")

// CacheDir is where install.sh puts the kernel and Prepare the boot images:
// $ROCESIM_CONFORMANCE_CACHE, else $XDG_CACHE_HOME/rocesim-conformance,
// else ~/.cache/rocesim-conformance.
func CacheDir() string {
	if d := os.Getenv("ROCESIM_CONFORMANCE_CACHE"); d != "" {
		return d
	}
	if d := os.Getenv("XDG_CACHE_HOME"); d != "" {
		return filepath.Join(d, "rocesim-conformance")
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return filepath.Join(os.TempDir(), "rocesim-conformance")
	}
	return filepath.Join(home, ".cache", "rocesim-conformance")
}

// Images are the files a VM boots from.
type Images struct {
	// Kernel is the ELF vmlinux (PVH boot), or the bzImage when no
	// vmlinux could be unpacked from it.
	Kernel string
	// Initramfs is the base initramfs (an uncompressed newc cpio archive).
	Initramfs string
	// KernelVersion is the kernel's release, e.g. 6.1.0-56-amd64.
	KernelVersion string
}

var (
	prepareMu   sync.Mutex
	prepareDone = map[string]Images{}
)

// hostTools are run on the host (qemu, ldd, modprobe for the load order,
// xz for the vmlinux) or copied into the guest.
var hostTools = []string{"qemu-system-x86_64", "ldd", "modprobe", "xz", "busybox", "rdma", "ibv_rc_pingpong", "ibv_devinfo", "rping", "ib_write_bw", "ib_send_lat", "ib_write_lat", "cc"}

// agentSource is the in-VM verbs agent; Prepare compiles it on the host
// and the guest runs it as AgentPath.
//
//go:embed agent/agent.c
var agentSource []byte

// cmAgentSource is the in-VM rdma_cm program (TestRpingCM's flush
// phase); Prepare compiles it on the host with -lrdmacm and the guest
// runs it as CMAgentPath. The verbs agent does not need librdmacm.
//
//go:embed agent/cmagent.c
var cmAgentSource []byte

// CMAgentPath is where the rdma_cm agent (conformance/agent/cmagent.c)
// sits in the guest.
const CMAgentPath = "/usr/bin/rocesim-cmagent"

// AgentPath is where the verbs agent (conformance/agent/agent.c) sits in
// the guest. It runs the script named by its argument (or stdin) and
// prints one JSON object per line; see the comment at the top of agent.c
// for the command language.
const AgentPath = "/usr/bin/rocesim-agent"

// guestBinaries are copied into the guest with the libraries ldd lists.
// rping, udaddy (rdmacm-utils) and ib_write_bw (perftest) are there for
// the CM captures (TestRpingCM, TestUdaddySIDR); ib_write_bw, ib_send_lat and ib_write_lat for
// the rxe<->rxe figures of make bench-realnet (TestRealnetFigures).
var guestBinaries = []string{"rdma", "ibv_devices", "ibv_devinfo", "ibv_rc_pingpong", "ibv_uc_pingpong", "ibv_ud_pingpong", "rping", "udaddy", "ib_write_bw",
	"ib_send_lat", "ib_write_lat"}

// guestModules are loaded in this order, each after its dependencies from
// modules.dep. rdma_rxe has "softdep pre: crc32c" and computes the ICRC
// with crc32, so the crc modules come first. Missing or built-in ones are
// skipped, except rdma_rxe. rdma_ucm (with rdma_cm and ib_cm) gives
// userspace rdma_cm, for rping.
var guestModules = []string{"crc32_generic", "crc32c_generic", "crc32c-intel", "libcrc32c", "virtio_pci", "virtio_net", "rdma_rxe", "rdma_ucm"}

// Prepare checks the host and builds, once per cache directory, the boot
// images. It returns an error wrapping ErrNotInstalled when install.sh has
// not run.
func Prepare() (Images, error) {
	prepareMu.Lock()
	defer prepareMu.Unlock()
	cache := CacheDir()
	if im, ok := prepareDone[cache]; ok {
		return im, nil
	}
	for _, tool := range hostTools {
		if _, err := exec.LookPath(tool); err != nil {
			return Images{}, fmt.Errorf("%w: %s not found", ErrNotInstalled, tool)
		}
	}
	kdir := filepath.Join(cache, "kernel")
	if _, err := os.Stat(filepath.Join(kdir, ".package")); err != nil {
		return Images{}, fmt.Errorf("%w: no unpacked kernel in %s", ErrNotInstalled, kdir)
	}
	ents, err := os.ReadDir(filepath.Join(kdir, "lib", "modules"))
	if err != nil || len(ents) == 0 {
		return Images{}, fmt.Errorf("%w: no lib/modules in %s", ErrNotInstalled, kdir)
	}
	kv := ents[0].Name()
	im := Images{KernelVersion: kv}

	bz := filepath.Join(kdir, "boot", "vmlinuz-"+kv)
	vmlinux := filepath.Join(cache, "vmlinux-"+kv)
	if _, err := os.Stat(vmlinux); err != nil {
		if err := unpackVmlinux(bz, vmlinux); err != nil {
			// The bzImage boots too, only slower.
			vmlinux = bz
		}
	}
	im.Kernel = vmlinux

	// The name carries a hash of what goes into the image, so a change to
	// /init or to the lists rebuilds it.
	// The agent is named by the hash of its source, so an edit rebuilds it.
	asum := sha256.Sum256(agentSource)
	agent := filepath.Join(cache, fmt.Sprintf("agent-%x", asum[:6]))
	if _, err := os.Stat(agent); err != nil {
		if err := buildAgent(agent, agentSource, "-libverbs"); err != nil {
			return Images{}, err
		}
	}
	csum := sha256.Sum256(cmAgentSource)
	cmAgent := filepath.Join(cache, fmt.Sprintf("cmagent-%x", csum[:6]))
	if _, err := os.Stat(cmAgent); err != nil {
		if err := buildAgent(cmAgent, cmAgentSource, "-lrdmacm", "-libverbs"); err != nil {
			return Images{}, err
		}
	}

	// The name carries a hash of what goes into the image, so a change to
	// /init, to the lists or to the agent rebuilds it.
	sum := sha256.Sum256([]byte(initScript + strings.Join(guestBinaries, " ") + strings.Join(guestModules, " ") + string(agentSource) + string(cmAgentSource)))
	im.Initramfs = filepath.Join(cache, fmt.Sprintf("initramfs-%s-%x.cpio", kv, sum[:6]))
	if _, err := os.Stat(im.Initramfs); err != nil {
		if err := buildInitramfs(kdir, kv, agent, cmAgent, im.Initramfs); err != nil {
			return Images{}, err
		}
	}
	prepareDone[cache] = im
	return im, nil
}

// unpackVmlinux finds the xz stream inside the bzImage that decompresses to
// an ELF file and writes that file to dst.
func unpackVmlinux(bz, dst string) error {
	data, err := os.ReadFile(bz)
	if err != nil {
		return err
	}
	magic := []byte{0xfd, '7', 'z', 'X', 'Z', 0x00}
	for off := 0; ; {
		i := bytes.Index(data[off:], magic)
		if i < 0 {
			return fmt.Errorf("conformance: no ELF xz stream in %s", bz)
		}
		off += i
		cmd := exec.Command("xz", "-dc", "--single-stream")
		cmd.Stdin = bytes.NewReader(data[off:])
		out, err := cmd.Output()
		if err == nil && bytes.HasPrefix(out, []byte("\x7fELF")) {
			return writeAtomic(dst, out, 0o644)
		}
		off++
	}
}

// buildAgent compiles source into dst with the host's cc, linked with
// libs. A missing verbs.h means libibverbs-dev is not installed, a
// missing rdma_cma.h librdmacm-dev.
func buildAgent(dst string, source []byte, libs ...string) error {
	dir, err := os.MkdirTemp("", "rocesim-agent-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	src := filepath.Join(dir, "agent.c")
	if err := os.WriteFile(src, source, 0o644); err != nil {
		return err
	}
	tmp := fmt.Sprintf("%s.tmp%d", dst, os.Getpid())
	out, err := exec.Command("cc", append([]string{"-O2", "-Wall", "-o", tmp, src}, libs...)...).CombinedOutput()
	if err != nil {
		if bytes.Contains(out, []byte("infiniband/verbs.h")) {
			return fmt.Errorf("%w: libibverbs-dev (infiniband/verbs.h) not found", ErrNotInstalled)
		}
		if bytes.Contains(out, []byte("rdma/rdma_cma.h")) {
			return fmt.Errorf("%w: librdmacm-dev (rdma/rdma_cma.h) not found", ErrNotInstalled)
		}
		return fmt.Errorf("conformance: building the agent: %v\n%s", err, out)
	}
	return os.Rename(tmp, dst)
}

func writeAtomic(dst string, data []byte, mode os.FileMode) error {
	tmp := fmt.Sprintf("%s.tmp%d", dst, os.Getpid())
	if err := os.WriteFile(tmp, data, mode); err != nil {
		return err
	}
	return os.Rename(tmp, dst)
}

// buildInitramfs writes the base initramfs to dst, with the agent binary
// at AgentPath and the rdma_cm agent at CMAgentPath.
func buildInitramfs(kdir, kv, agent, cmAgent, dst string) error {
	a := newArchive()
	for _, d := range []string{"bin", "sbin", "usr/bin", "usr/sbin", "etc", "proc", "sys", "dev", "tmp", "run", "lib/modules"} {
		a.dir(d)
	}
	// busybox-static needs no libraries; /init runs it as /bin/busybox
	// whatever PATH order finds it under on the host (/usr/bin with merged /usr).
	bb, err := exec.LookPath("busybox")
	if err != nil {
		return fmt.Errorf("%w: busybox not found", ErrNotInstalled)
	}
	bbData, err := os.ReadFile(bb)
	if err != nil {
		return err
	}
	a.file("bin/busybox", bbData, 0o755)
	for _, b := range guestBinaries {
		p, err := exec.LookPath(b)
		if err != nil {
			return fmt.Errorf("%w: %s not found", ErrNotInstalled, b)
		}
		if err := a.withLibs(p); err != nil {
			return err
		}
	}
	// libibverbs dlopen()s its providers and glibc dlopen()s libgcc_s
	// (pthread_exit unwinding), so ldd lists neither.
	provs, _ := filepath.Glob("/usr/lib/x86_64-linux-gnu/libibverbs/librxe-rdmav*.so")
	if len(provs) == 0 {
		return fmt.Errorf("%w: no librxe provider (ibverbs-providers)", ErrNotInstalled)
	}
	for _, p := range append(provs, "/etc/libibverbs.d/rxe.driver", "/lib/x86_64-linux-gnu/libgcc_s.so.1") {
		if err := a.withLibs(p); err != nil {
			return err
		}
	}
	for _, ag := range []struct{ bin, path string }{{agent, AgentPath}, {cmAgent, CMAgentPath}} {
		data, err := os.ReadFile(ag.bin)
		if err != nil {
			return err
		}
		a.file(ag.path, data, 0o755)
		if err := a.addFiles(lddLibs(ag.bin)); err != nil {
			return err
		}
	}
	a.file("etc/passwd", []byte("root:x:0:0:root:/root:/bin/sh\n"), 0o644)
	a.file("etc/nsswitch.conf", []byte("hosts: files\n"), 0o644)
	a.file("etc/hosts", []byte("127.0.0.1 localhost\n"), 0o644)

	// Modules in load order: each module's dependencies first, as modprobe
	// resolves them from the depmod'ed tree.
	var order []string
	seen := map[string]bool{}
	for _, m := range guestModules {
		out, err := exec.Command("modprobe", "-d", kdir, "-S", kv, "--show-depends", m).Output()
		if err != nil {
			if m == "rdma_rxe" {
				return fmt.Errorf("%w: modprobe --show-depends rdma_rxe in %s: %v", ErrNotInstalled, kdir, err)
			}
			continue
		}
		for _, line := range strings.Split(string(out), "\n") {
			f := strings.Fields(line)
			if len(f) < 2 || f[0] != "insmod" || seen[f[1]] {
				continue
			}
			seen[f[1]] = true
			data, err := os.ReadFile(f[1])
			if err != nil {
				return err
			}
			name := "lib/modules/" + filepath.Base(f[1])
			a.file(name, data, 0o644)
			order = append(order, "/"+name)
		}
	}
	a.file("lib/modules/load-order", []byte(strings.Join(order, "\n")+"\n"), 0o644)
	a.file("init", []byte(initScript), 0o755)
	return writeAtomic(dst, a.bytes(), 0o644)
}

// archive is a newc cpio archive of directories and regular files
// (symbolic links are followed when files are added).
type archive struct {
	buf   bytes.Buffer
	ino   int
	paths map[string]bool
}

func newArchive() *archive { return &archive{paths: map[string]bool{}} }

func (a *archive) header(name string, mode uint32, size int) {
	a.ino++
	fmt.Fprintf(&a.buf, "070701%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X",
		a.ino, mode, 0, 0, 1, 0, size, 0, 0, 0, 0, len(name)+1, 0)
	a.buf.WriteString(name)
	a.buf.WriteByte(0)
	a.pad()
}

func (a *archive) pad() {
	for a.buf.Len()%4 != 0 {
		a.buf.WriteByte(0)
	}
}

func (a *archive) dir(name string) {
	name = strings.Trim(name, "/")
	if name == "" || name == "." || a.paths[name] {
		return
	}
	a.dir(filepath.Dir(name))
	a.paths[name] = true
	a.header(name, 0o040755, 0)
}

func (a *archive) file(name string, data []byte, perm uint32) {
	name = strings.TrimLeft(name, "/")
	if a.paths[name] {
		return
	}
	a.dir(filepath.Dir(name))
	a.paths[name] = true
	a.header(name, 0o100000|perm, len(data))
	a.buf.Write(data)
	a.pad()
}

// withLibs adds the host file at path p (at the same path) and the shared
// libraries ldd reports for it.
func (a *archive) withLibs(p string) error {
	return a.addFiles(append([]string{p}, lddLibs(p)...))
}

// lddLibs returns the shared libraries ldd reports for the host file p.
func lddLibs(p string) []string {
	var paths []string
	if out, err := exec.Command("ldd", p).Output(); err == nil {
		for _, line := range strings.Split(string(out), "\n") {
			f := strings.Fields(line)
			switch {
			case len(f) >= 3 && f[1] == "=>" && strings.HasPrefix(f[2], "/"):
				paths = append(paths, f[2])
			case len(f) >= 1 && strings.HasPrefix(f[0], "/"):
				paths = append(paths, f[0])
			}
		}
	}
	return paths
}

// addFiles adds the host files at paths, each at the same path.
func (a *archive) addFiles(paths []string) error {
	for _, q := range paths {
		if a.paths[strings.TrimLeft(q, "/")] {
			continue
		}
		st, err := os.Stat(q)
		if err != nil {
			return fmt.Errorf("%w: %v", ErrNotInstalled, err)
		}
		data, err := os.ReadFile(q)
		if err != nil {
			return err
		}
		a.file(q, data, uint32(st.Mode().Perm()))
	}
	return nil
}

func (a *archive) bytes() []byte {
	a.header("TRAILER!!!", 0, 0)
	return a.buf.Bytes()
}

// initScript is the guest's PID 1. Kernel command-line words name=value
// that the kernel does not know arrive as environment variables.
const initScript = `#!/bin/busybox sh
/bin/busybox --install -s /bin
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
while read -r m; do
  [ -n "$m" ] && { insmod "$m" 2>/tmp/err || grep -q exists /tmp/err || { echo "insmod $m:"; cat /tmp/err; }; }
done < /lib/modules/load-order
# virtio_net probes asynchronously.
n=0; while [ ! -e /sys/class/net/eth0 ] && [ $n -lt 200 ]; do sleep 0.05; n=$((n+1)); done
ip link set lo up
ip addr add "$rxe_ip/24" dev eth0
ip link set eth0 up
rdma link add rxe0 type rxe netdev eth0 || echo "rdma link add rxe0 failed"
# The RoCE v2 GID of the IPv4 address is ::ffff:a.b.c.d.
want=$(echo "$rxe_ip" | awk -F. '{printf "0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x", $1, $2, $3, $4}')
RXE_GID=
n=0
while [ -z "$RXE_GID" ] && [ $n -lt 200 ]; do
  for g in /sys/class/infiniband/rxe0/ports/1/gids/*; do
    i=${g##*/}
    if [ "$(cat "$g" 2>/dev/null)" = "$want" ] &&
       [ "$(cat /sys/class/infiniband/rxe0/ports/1/gid_attrs/types/$i 2>/dev/null)" = "RoCE v2" ]; then
      RXE_GID=$i; break
    fi
  done
  [ -n "$RXE_GID" ] || { sleep 0.05; n=$((n+1)); }
done
export RXE_GID rxe_ip rxe_peer
echo "` + markerReady + ` uptime=$(cut -d' ' -f1 /proc/uptime) ip=$rxe_ip gid=$RXE_GID"
sh /cmd.sh
echo "` + markerExit + `$?"
sync
poweroff -f
`

// VMConfig describes one guest.
type VMConfig struct {
	// Name labels the VM in errors and log lines.
	Name string
	// IP is eth0's IPv4 address; the prefix is /24.
	IP string
	// Peer is exported to Cmd as $rxe_peer (optional).
	Peer string
	// LocalPort and RemotePort are the UDP ports on 127.0.0.1 of this VM's
	// and its peer's end of the Ethernet link.
	LocalPort, RemotePort int
	// Cmd is a shell script run by busybox sh once rxe0 is up. It sees
	// $RXE_GID (the GID index of the RoCE v2 ::ffff:IP GID), $rxe_ip and
	// $rxe_peer.
	Cmd string
	// Timeout bounds the whole life of the VM (default 5 minutes).
	Timeout time.Duration
	// LogPath, if set, receives the serial console as it arrives.
	LogPath string
	// MemoryMB is the guest's memory (default 512).
	MemoryMB int
	// Interactive connects the serial console's input to VM.Send, so the
	// host can type to Cmd (StartAgent drives the verbs agent this way).
	Interactive bool
	// CapturePath, if set, receives QEMU's own pcap of eth0 (filter-dump
	// on the netdev): every frame the guest sent or received.
	CapturePath string
	// Files are put in the guest beside /cmd.sh, executable: path in the
	// guest to content (a test's own probe program, say).
	Files map[string][]byte
}

// Result is what a guest did.
type Result struct {
	// Output is the serial console, carriage returns removed.
	Output string
	// ExitCode is Cmd's exit status as the guest printed it.
	ExitCode int
	// Ready is the host time from launch to the READY marker (zero if
	// it never appeared).
	Ready time.Duration
}

// VM is a running guest.
type VM struct {
	cfg    VMConfig
	cmd    *exec.Cmd
	cancel context.CancelFunc
	start  time.Time
	dir    string

	stdin io.WriteCloser // nil unless Interactive

	mu      sync.Mutex
	out     bytes.Buffer
	lines   []string      // the console, line by line
	changed chan struct{} // closed and replaced when a line arrives
	ready   time.Duration
	done    chan struct{}
}

// Pid is the process ID of the guest's QEMU.
func (vm *VM) Pid() int { return vm.cmd.Process.Pid }

// Boot starts a guest. The caller must call Wait.
func Boot(ctx context.Context, cfg VMConfig) (*VM, error) {
	im, err := Prepare()
	if err != nil {
		return nil, err
	}
	if net.ParseIP(cfg.IP).To4() == nil {
		return nil, fmt.Errorf("conformance: VM %s: IP %q is not IPv4", cfg.Name, cfg.IP)
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 5 * time.Minute
	}
	if cfg.MemoryMB == 0 {
		cfg.MemoryMB = 512
	}
	dir, err := os.MkdirTemp("", "rocesim-vm-")
	if err != nil {
		return nil, err
	}
	// The kernel unpacks concatenated cpio archives in order: the base,
	// then this one with /cmd.sh.
	base, err := os.ReadFile(im.Initramfs)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	a := newArchive()
	a.file("cmd.sh", []byte(cfg.Cmd+"\n"), 0o755)
	for _, name := range slices.Sorted(maps.Keys(cfg.Files)) {
		a.file(name, cfg.Files[name], 0o755)
	}
	initrd := filepath.Join(dir, "initrd.cpio")
	if err := os.WriteFile(initrd, append(base, a.bytes()...), 0o644); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}

	ip := net.ParseIP(cfg.IP).To4()
	netdev := fmt.Sprintf("dgram,id=n0,local.type=inet,local.host=127.0.0.1,local.port=%d,remote.type=inet,remote.host=127.0.0.1,remote.port=%d",
		cfg.LocalPort, cfg.RemotePort)
	// no_timer_check: on a busy host the TCG guest is too slow for the
	// kernel's IO-APIC timer check (check_timer in
	// arch/x86/kernel/apic/io_apic.c counts ticks over a delay loop), which
	// then panics at boot with "IO-APIC + timer doesn't work!"; seen with
	// six CPU hogs on two cores. The check only guards against broken
	// chipsets, which QEMU's PIT and IO-APIC are not.
	appendLine := fmt.Sprintf("console=ttyS0 panic=-1 loglevel=4 no_timer_check rxe_ip=%s", cfg.IP)
	if cfg.Peer != "" {
		appendLine += " rxe_peer=" + cfg.Peer
	}
	args := []string{
		"-nodefaults", "-no-user-config", "-machine", "pc,accel=tcg", "-cpu", "max",
		"-smp", "1", "-m", strconv.Itoa(cfg.MemoryMB), "-display", "none", "-no-reboot",
		"-kernel", im.Kernel, "-initrd", initrd, "-append", appendLine,
		"-netdev", netdev,
		"-device", fmt.Sprintf("virtio-net-pci,netdev=n0,mac=52:54:00:%02x:%02x:%02x", ip[1], ip[2], ip[3]),
		"-serial", "stdio",
	}
	if cfg.CapturePath != "" {
		args = append(args, "-object", "filter-dump,id=d0,netdev=n0,file="+cfg.CapturePath)
	}
	cctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	cmd := exec.CommandContext(cctx, "qemu-system-x86_64", args...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		cancel()
		os.RemoveAll(dir)
		return nil, err
	}
	cmd.Stderr = cmd.Stdout
	var stdin io.WriteCloser
	if cfg.Interactive {
		if stdin, err = cmd.StdinPipe(); err != nil {
			cancel()
			os.RemoveAll(dir)
			return nil, err
		}
	}
	var logf io.Writer = io.Discard
	var logFile *os.File
	if cfg.LogPath != "" {
		if logFile, err = os.Create(cfg.LogPath); err != nil {
			cancel()
			os.RemoveAll(dir)
			return nil, err
		}
		logf = logFile
	}
	vm := &VM{cfg: cfg, cmd: cmd, cancel: cancel, dir: dir, stdin: stdin, done: make(chan struct{}), changed: make(chan struct{})}
	vm.start = time.Now()
	if err := cmd.Start(); err != nil {
		cancel()
		os.RemoveAll(dir)
		if logFile != nil {
			logFile.Close()
		}
		return nil, fmt.Errorf("conformance: VM %s: %w", cfg.Name, err)
	}
	go func() {
		defer close(vm.done)
		if logFile != nil {
			defer logFile.Close()
		}
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := strings.TrimRight(sc.Text(), "\r")
			fmt.Fprintln(logf, line)
			vm.mu.Lock()
			vm.out.WriteString(line)
			vm.out.WriteByte('\n')
			vm.lines = append(vm.lines, line)
			close(vm.changed)
			vm.changed = make(chan struct{})
			if vm.ready == 0 && strings.Contains(line, markerReady) {
				vm.ready = time.Since(vm.start)
			}
			vm.mu.Unlock()
		}
	}()
	return vm, nil
}

var exitRE = regexp.MustCompile(regexp.QuoteMeta(markerExit) + `(\d+)`)

// Wait waits for the guest to power off (or for its timeout) and returns
// what it printed. The error is non-nil when the guest printed no exit
// status; the Result is filled in as far as it goes.
func (vm *VM) Wait() (Result, error) {
	<-vm.done
	werr := vm.cmd.Wait()
	vm.cancel()
	os.RemoveAll(vm.dir)
	vm.mu.Lock()
	res := Result{Output: vm.out.String(), ExitCode: -1, Ready: vm.ready}
	vm.mu.Unlock()
	m := exitRE.FindStringSubmatch(res.Output)
	if m == nil {
		return res, fmt.Errorf("%w: VM %s (qemu: %v)", ErrNoExitStatus, vm.cfg.Name, werr)
	}
	res.ExitCode, _ = strconv.Atoi(m[1])
	return res, nil
}

// FreeUDPPorts returns n UDP ports on 127.0.0.1 that were free a moment
// ago, for VMConfig.LocalPort and RemotePort.
func FreeUDPPorts(n int) ([]int, error) {
	var ports []int
	var conns []net.PacketConn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for range n {
		c, err := net.ListenPacket("udp4", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		conns = append(conns, c)
		ports = append(ports, c.LocalAddr().(*net.UDPAddr).Port)
	}
	return ports, nil
}

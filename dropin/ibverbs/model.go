package main

// The model inside the program's process: one verbs.World, one host per
// device, and the tables that take the C side's handles, addresses and
// file descriptors to the world's objects. Pure Go (no cgo): exports.go
// converts the C structures and calls in here under the process lock.
//
// Flow of a verb:
//  1. The C glue (glue.c) calls an rs_* export with handles; the export
//     takes proc.mu and converts the C structure.
//  2. The model translates what differs between the program's view and
//     the world's: memory addresses (the program's own, or its iova)
//     become the MR's simulated address, found by L_Key or R_Key.
//  3. The verb runs on the world's object; a verb that waits (a poll that
//     finds nothing, a blocking get_cq_event) runs the world to its next
//     event: virtual time moves only there.
//  4. After every run, asynchronous events are collected and each
//     channel's and context's file descriptor is made readable exactly
//     while an event waits on it.
//
// The world's frames enter and leave through its fabric (the hosts on
// one switch, which also loops a device's frames to itself back): that
// is the one place a later version joins a fabric daemon instead.

import (
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"github.com/rocesim/rocesim/faults"
	"github.com/rocesim/rocesim/internal/will"
	"github.com/rocesim/rocesim/ladder"
	"github.com/rocesim/rocesim/nic"
	"github.com/rocesim/rocesim/sim"
	"github.com/rocesim/rocesim/verbs"
	"github.com/rocesim/rocesim/wire/capture"
)

// MaxDevices bounds ROCESIM_DEVICES.
const MaxDevices = 16

// DefaultIdleWake is ROCESIM_IDLE_WAKE's default (idle.go).
const DefaultIdleWake = 50 * time.Millisecond

// DefaultFabricIdleWake is ROCESIM_IDLE_WAKE's default on a fabric
// (idle.go, idleOnFabric): a program that spins on its memory for the
// peer's WRITE (perftest's ib_write_lat) lets the fabric's clock go on
// after this much wall time, once per message.
const DefaultFabricIdleWake = time.Millisecond

// Config is what the environment asks of the model (see readConfig).
type Config struct {
	Devices int
	// DevicePrefix names the devices: DevicePrefix0, DevicePrefix1, …
	// (ROCESIM_DEVICE_PREFIX; default "rocesim"). A script written for
	// rxe (ib_write_bw -d rxe0) runs unchanged with "rxe".
	DevicePrefix string
	Seed         uint64
	Profile      verbs.Profile
	Plan         *faults.Plan
	PlanText     string
	Pcap         string
	Ladder       string // ROCESIM_LADDER: where the ladder goes at exit (.svg: SVG, else text)
	MaxEvents    uint64
	// IdleWake is how long the program may make no verb call, while a
	// CQ on a channel is armed, before the library runs the world for it
	// (see idle.go); 0 never.
	IdleWake time.Duration
	// PollNoWait (ROCESIM_POLL_WAIT=off): a poll_cq that finds nothing
	// returns 0 without moving time. For a driver that holds the clock
	// itself (the conformance suite's C-ABI leg: procfabric's
	// Daemon.Hold) and has its program drain CQs at chosen instants;
	// time then moves only while the program waits outside the verbs
	// (IdleWake) or for an event.
	PollNoWait bool
	// Fabric and Node (ROCESIM_FABRIC, ROCESIM_NODE) put the process's
	// one device on node Node of the fabric daemon called Fabric
	// (fabric.go); FabricDir (ROCESIM_FABRIC_DIR) is the daemon's socket
	// directory, "" for procfabric.SocketDir().
	Fabric, Node, FabricDir string
	// UDP (ROCESIM_TRANSPORT=udp) puts the process's one device on a UDP
	// socket at Addr (ROCESIM_ADDR; loopback unless ROCESIM_ROUTABLE=1),
	// port 4791, in real time (udp.go).
	UDP  bool
	Addr netip.Addr
	// WillFD (ROCESIM_WILL_FD, which `rocesim exec --transport udp`
	// sets) is a pipe to the program's keeper: the UDP device's will
	// goes there (internal/will); 0 (or -1) for none.
	WillFD int
}

// readConfig reads the ROCESIM_* variables through getenv.
func readConfig(getenv func(string) string) (Config, error) {
	c := Config{Devices: 1, DevicePrefix: DefaultDevicePrefix, Seed: 1, Profile: verbs.ProfileRXE, IdleWake: DefaultIdleWake}
	if s := getenv("ROCESIM_DEVICE_PREFIX"); s != "" {
		if !validPrefix(s) {
			return c, fmt.Errorf("ROCESIM_DEVICE_PREFIX=%q: want 1 to %d letters, digits, '_' or '-', starting with a letter (rxe, mlx5_)", s, maxPrefixLen)
		}
		c.DevicePrefix = s
	}
	if s := getenv("ROCESIM_DEVICES"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > MaxDevices {
			return c, fmt.Errorf("ROCESIM_DEVICES=%q: want a number of devices from 1 to %d", s, MaxDevices)
		}
		c.Devices = n
	}
	if s := getenv("ROCESIM_SEED"); s != "" {
		n, err := strconv.ParseUint(s, 0, 64)
		if err != nil {
			return c, fmt.Errorf("ROCESIM_SEED=%q: want an unsigned number", s)
		}
		c.Seed = n
	}
	switch s := getenv("ROCESIM_PROFILE"); s {
	case "", "rxe":
	case "spec":
		c.Profile = verbs.ProfileSpec
	default:
		return c, fmt.Errorf("ROCESIM_PROFILE=%q: want rxe or spec", s)
	}
	if s := getenv("ROCESIM_FAULTS"); s != "" {
		p, err := faults.ParseInline(s)
		if err != nil {
			return c, fmt.Errorf("ROCESIM_FAULTS: %w", err)
		}
		c.Plan, c.PlanText = p, s
	}
	switch s := getenv("ROCESIM_POLL_WAIT"); s {
	case "", "on":
	case "off":
		c.PollNoWait = true
	default:
		return c, fmt.Errorf("ROCESIM_POLL_WAIT=%q: want on or off", s)
	}
	c.Fabric, c.Node, c.FabricDir = getenv("ROCESIM_FABRIC"), getenv("ROCESIM_NODE"), getenv("ROCESIM_FABRIC_DIR")
	if c.Fabric != "" && c.Node == "" {
		return c, fmt.Errorf("ROCESIM_FABRIC=%q: ROCESIM_NODE must name the node this process is", c.Fabric)
	}
	if c.Fabric != "" {
		// The daemon owns the plan and the capture of a fabric of
		// processes; asking one process for its own is a mistake to say.
		for _, k := range []string{"ROCESIM_FAULTS", "ROCESIM_PCAP", "ROCESIM_LADDER"} {
			if getenv(k) != "" {
				return c, fmt.Errorf("%s: not available with ROCESIM_FABRIC (the fabric's daemon has the plan, the capture and the ladder: "+
					"give rocesim exec or rocesim fabric --faults, --pcap and --ladder)", k)
			}
		}
	}
	udp, err := transportOf(getenv("ROCESIM_TRANSPORT"))
	if err != nil {
		return c, err
	}
	if udp {
		if c.Fabric != "" {
			return c, fmt.Errorf("ROCESIM_TRANSPORT=udp and ROCESIM_FABRIC=%q: a device is on one or the other", c.Fabric)
		}
		if c.Addr, err = parseAddr(getenv("ROCESIM_ADDR"), getenv("ROCESIM_ROUTABLE") == "1"); err != nil {
			return c, err
		}
		// Frames cross a real network there: no simulated fabric applies
		// a plan or keeps a capture, so asking for one is a mistake to
		// say, not to ignore.
		for _, k := range []string{"ROCESIM_FAULTS", "ROCESIM_PCAP", "ROCESIM_LADDER"} {
			if getenv(k) != "" {
				return c, fmt.Errorf("%s: not available with ROCESIM_TRANSPORT=udp (the frames cross a real network: capture them there, or put rocesim switch in the path for faults)", k)
			}
		}
		c.UDP = true
		c.WillFD = -1
		if s := getenv(will.EnvFD); s != "" {
			fd, err := strconv.Atoi(s)
			if err != nil || fd < 3 {
				return c, fmt.Errorf("%s=%q: want the number of an open file descriptor above 2", will.EnvFD, s)
			}
			c.WillFD = fd
		}
	}
	c.Pcap = getenv("ROCESIM_PCAP")
	c.Ladder = getenv("ROCESIM_LADDER")
	if s := getenv("ROCESIM_MAX_EVENTS"); s != "" {
		n, err := strconv.ParseUint(s, 0, 64)
		if err != nil || n == 0 {
			return c, fmt.Errorf("ROCESIM_MAX_EVENTS=%q: want a positive number", s)
		}
		c.MaxEvents = n
	}
	switch s := getenv("ROCESIM_IDLE_WAKE"); s {
	case "":
		if c.Fabric != "" || c.UDP {
			c.IdleWake = DefaultFabricIdleWake
		}
	case "off":
		c.IdleWake = 0
	default:
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 {
			return c, fmt.Errorf("ROCESIM_IDLE_WAKE=%q: want a duration such as 50ms, or off", s)
		}
		c.IdleWake = d
	}
	if c.Plan != nil {
		// A link or node the world will not have makes a rule that can
		// never match: said now, as a scenario's would be, not found
		// out from a run that lost nothing.
		if err := c.Plan.CheckNames(topologyNames(c.DevicePrefix, c.Devices)); err != nil {
			return c, fmt.Errorf("ROCESIM_FAULTS: %w", err)
		}
	}
	return c, nil
}

// DefaultDevicePrefix is ROCESIM_DEVICE_PREFIX's default.
const DefaultDevicePrefix = "rocesim"

// maxPrefixLen bounds ROCESIM_DEVICE_PREFIX: a device's name, prefix and
// index, fits struct ibv_device's name (IBV_SYSFS_NAME_MAX, 64 bytes)
// and the sysfs path built from it with room to spare.
const maxPrefixLen = 32

// validPrefix reports whether s can begin a device's name: a letter, then
// letters, digits, '_' and '-' (rxe, siw, mlx5_), which the fault plans'
// link names ("rxe0-sw") and a sysfs path take as they are.
func validPrefix(s string) bool {
	if len(s) == 0 || len(s) > maxPrefixLen {
		return false
	}
	for i, r := range s {
		letter := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z'
		if !letter && (i == 0 || !(r >= '0' && r <= '9' || r == '_' || r == '-')) {
			return false
		}
	}
	return true
}

// deviceName is the name of device i, and of its host and fabric node.
func deviceName(prefix string, i int) string { return prefix + strconv.Itoa(i) }

// topologyNames are the links and nodes of a world of n devices named
// after prefix as newProcess builds it: every device's host on the
// switch "sw", over the link "rocesimI-sw" (prefix "rocesim").
func topologyNames(prefix string, n int) (links, nodes []string) {
	for i := range n {
		links = append(links, deviceName(prefix, i)+"-sw")
		nodes = append(nodes, deviceName(prefix, i))
	}
	return links, append(nodes, "sw")
}

// process is the model of one program: the world and the objects the
// program holds, behind one lock (C programs call from several threads).
type process struct {
	mu   sync.Mutex
	wake *sync.Cond // broadcast when a waiter may find something new
	cfg  Config
	w    *verbs.World
	tap  capture.Writer
	tr   *sim.Trace // for the ladder; nil without ROCESIM_LADDER
	devs []*device
	objs []any // by handle; objs[0] is unused so that 0 is no handle
	chs  []*channel
	ctxs []*devContext
	fds  fdOps
	// exit ends the program when the world cannot go on (a runaway):
	// os.Exit, replaced in tests.
	exit   func(code int)
	stderr io.Writer
	closed bool
	// calls counts the verbs the program has called (idle.go watches it).
	calls uint64
	// wcs is poll_cq's scratch, used under mu.
	wcs [pollBatch]verbs.WC
	// fab is the process's attachment to a fabric daemon; nil for a
	// world of its own (fabric.go).
	fab *fabricLink
	// threads watches the program's threads, so that a wait does not
	// move virtual time while another thread is about to act
	// (threads.go).
	threads threadWatch
}

// pollBatch bounds the completions one poll_cq takes (the rest wait for
// the next call, as on a real CQ).
const pollBatch = 64

// device is one host of the world (rocesim0, rocesim1, ...).
type device struct {
	name  string
	host  *verbs.Host
	admin *verbs.Context        // the driver's own context: async events
	keys  map[uint32]*memRegion // by L_Key (= R_Key), looked up only
	mrs   []*memRegion          // live, in registration order
	// windows: the region each memory window's current R_Key opens,
	// set at each bind (looked up only).
	windows map[uint32]*memRegion
	qps     []*qp // live, for async events (creation order)
	cqs     []*cq
	srqs    []*srq
	gids    []netip.Addr
}

type devContext struct {
	dev       *device
	c         *verbs.Context
	asyncFD   int
	async     []asyncEvent // collected, not yet taken
	signalled bool
	closed    bool // by ibv_close_device
	bouncePD  *verbs.PD
	bounce    *memRegion // inline data is copied here (see postSend)
}

type pd struct {
	ctx *devContext
	p   *verbs.PD
}

// memRegion is an MR as the program sees it (va, its address or iova)
// and as the world does (mr.Addr).
type memRegion struct {
	dev    *device
	mr     *verbs.MR
	va     uint64
	length uint64
}

type channel struct {
	ctx       *devContext
	ch        *verbs.CompChannel
	fd        int
	signalled bool
	// armed: a CQ on the channel was armed (req_notify_cq) and no event
	// has come since; the program is expecting one (idle.go).
	armed   bool
	pending int // ch.Pending() when last settled
}

type cq struct {
	ctx *devContext
	q   *verbs.CQ
	c   unsafe.Pointer // the program's struct ibv_cq
	ch  *channel       // nil for none
	// unacked counts the events of the CQ the program read
	// (get_cq_event) and has not acknowledged (ack_cq_events):
	// destroy_cq waits for them (destroyCQ).
	unacked int
}

type qp struct {
	ctx    *devContext
	q      *verbs.QP
	typ    verbs.QPType
	c      unsafe.Pointer // the program's struct ibv_qp
	remote *device        // the device the AV names (RC, UC): its R_Keys
}

type srq struct {
	ctx *devContext
	s   *verbs.SRQ
	c   unsafe.Pointer
}

type mw struct {
	pd *pd
	m  *verbs.MW
}

type ah struct {
	pd     *pd
	a      *verbs.AH
	remote *device
}

type asyncEvent struct {
	typ     verbs.AsyncEventType
	element unsafe.Pointer // the program's QP, CQ or SRQ; nil for a port event
	port    int
}

// fdOps are the file descriptors behind channels and async events:
// eventfds on Linux (fd_linux.go).
type fdOps interface {
	open() (int, error)
	set(fd int, readable bool)
	close(fd int)
}

// newProcess builds the world cfg asks for: cfg.Devices hosts on one
// switch, each looping its own frames back.
func newProcess(cfg Config, fds fdOps, stderr io.Writer, exit func(int)) (*process, error) {
	if cfg.DevicePrefix == "" {
		cfg.DevicePrefix = DefaultDevicePrefix
	}
	p := &process{cfg: cfg, fds: fds, objs: []any{nil}, exit: exit, stderr: stderr}
	p.wake = sync.NewCond(&p.mu)
	p.threads.read, p.threads.now, p.threads.list = procThread, time.Now, listTasks
	if cfg.Fabric != "" {
		return p, p.joinFabric()
	}
	if cfg.UDP {
		return p, p.joinUDP()
	}
	wc := verbs.WorldConfig{Seed: cfg.Seed, Plan: cfg.Plan, Profile: cfg.Profile, MaxEvents: cfg.MaxEvents, LinkLocalGID: true}
	if cfg.Pcap != "" {
		comment := fmt.Sprintf("rocesim drop-in libibverbs: ROCESIM_DEVICES=%d ROCESIM_SEED=%d ROCESIM_PROFILE=%v", cfg.Devices, cfg.Seed, cfg.Profile)
		if cfg.DevicePrefix != DefaultDevicePrefix {
			comment += " ROCESIM_DEVICE_PREFIX=" + cfg.DevicePrefix
		}
		if cfg.PlanText != "" {
			comment += " ROCESIM_FAULTS=" + strconv.Quote(cfg.PlanText)
		}
		tap, err := capture.Create(cfg.Pcap, capture.PcapngOptions{Comment: comment})
		if err != nil {
			return nil, fmt.Errorf("ROCESIM_PCAP: %w", err)
		}
		p.tap, wc.Capture = tap, tap
	}
	if cfg.Ladder != "" {
		p.tr = &sim.Trace{}
		wc.Trace = p.tr
	}
	p.w = verbs.NewWorld(wc)
	for i := range cfg.Devices {
		name := deviceName(cfg.DevicePrefix, i)
		p.devs = append(p.devs, &device{name: name, host: p.w.AddHost(name), keys: map[uint32]*memRegion{},
			windows: map[uint32]*memRegion{}})
	}
	if err := p.w.ConnectSwitch(); err != nil {
		return nil, err
	}
	return p, p.openAdmin()
}

// openAdmin opens each device's driver context (its async events) and
// reads its GID table.
func (p *process) openAdmin() error {
	for _, d := range p.devs {
		ctx, err := d.host.GetDeviceList()[0].Open()
		if err != nil {
			return err
		}
		d.admin = ctx
		for i := 0; ; i++ {
			g, err := ctx.QueryGID(1, i)
			if err != nil {
				break
			}
			d.gids = append(d.gids, g)
		}
	}
	return nil
}

// emptyProcess is a process with no devices, for an environment the
// model cannot follow.
func emptyProcess() *process {
	p := &process{objs: []any{nil}, exit: osExit, stderr: os.Stderr, fds: nil}
	p.wake = sync.NewCond(&p.mu)
	p.w = verbs.NewWorld(verbs.WorldConfig{})
	return p
}

// add gives o a handle.
func (p *process) add(o any) uint32 {
	p.objs = append(p.objs, o)
	return uint32(len(p.objs) - 1)
}

// drop forgets handle h.
func (p *process) drop(h uint32) { p.objs[h] = nil }

// object returns the object of handle h if it is a T.
func object[T any](p *process, h uint32) (T, bool) {
	var zero T
	if h == 0 || int(h) >= len(p.objs) {
		return zero, false
	}
	o, ok := p.objs[h].(T)
	return o, ok
}

// destroy destroys the object of handle h with fn and forgets the
// handle; EINVAL if h is not a T.
func destroy[T any](p *process, h uint32, fn func(T) error) syscall.Errno {
	v, ok := object[T](p, h)
	if !ok {
		return syscall.EINVAL
	}
	if err := fn(v); err != nil {
		return errnoOf(err)
	}
	p.drop(h)
	return 0
}

// without returns s less its element v.
func without[T comparable](s []T, v T) []T {
	if i := slices.Index(s, v); i >= 0 {
		return slices.Delete(s, i, i+1)
	}
	return s
}

// errnoOf returns the errno an error of the model carries (EINVAL if it
// carries none).
func errnoOf(err error) syscall.Errno {
	if err == nil {
		return 0
	}
	var e syscall.Errno
	if errors.As(err, &e) {
		return e
	}
	return syscall.EINVAL
}

// deviceByGID returns the process's device that has gid, or nil.
func (p *process) deviceByGID(gid netip.Addr) *device {
	gid = gid.Unmap()
	for _, d := range p.devs {
		for _, g := range d.gids {
			if g.Unmap() == gid {
				return d
			}
		}
	}
	return nil
}

// ---- virtual time ----

// enter takes the process lock for a call of the program (every export
// does, through lock): the call is counted for the idle loop (idle.go),
// and over UDP the world first catches up with the wall clock, so that
// what the call does happens at the instant it is made (catchUp).
func (p *process) enter() {
	w := &p.threads
	if w.self == nil {
		p.mu.Lock()
	} else {
		tid := w.self()
		p.mu.Lock()
		w.note(tid)
	}
	p.calls++
	p.catchUp()
}

// step runs the world to its next event (every event of that instant)
// and reports whether there was one.
func (p *process) step() bool {
	if p.fab != nil {
		return p.stepFabric(false)
	}
	return p.stepWorld()
}

// stepPoll is step for a poll_cq that found nothing. On a fabric the
// clock moves only when every process waits, and a poll waits with the
// others; when they all wait and nothing is left to happen, the fabric
// wakes it at once, as a real poll returns 0 (procfabric's PollWait):
// its program may be the one the others wait for outside the verbs.
func (p *process) stepPoll() bool {
	if p.fab != nil {
		return p.stepFabric(true)
	}
	return p.stepWorld()
}

// waitStep is step, or stepPoll if poll, for a program's thread that
// waits in a verb. While another thread of the program is about to act
// (threads.go) the process counts as running: the thread naps with the
// lock released instead, and reports progress so that its caller looks
// again; a poll returns at once with what it found (false), as a poll of
// a quiet NIC does, and its program polls again. In a program of several
// threads, a blocking wait that finds the others still looks once more
// after a nap before it moves time (threadWatch.settled): a thread may
// sleep a moment on a lock of libc's on its way to act.
func (p *process) waitStep(poll bool) bool {
	if p.holdForThreads() {
		if poll {
			return false
		}
		p.nap(holdNap)
		return true
	}
	if !poll && !p.threads.settled() {
		p.nap(holdNap)
		return true
	}
	p.threads.endHold()
	if poll {
		return p.stepPoll()
	}
	return p.step()
}

// holdForThreads reports whether a wait must not move virtual time yet
// because another of the program's threads is about to act. A thread
// that joins another's wait on the fabric moves nothing itself, and over
// UDP the clock is the wall clock: neither is held.
func (p *process) holdForThreads() bool {
	if p.fab != nil && (p.fab.udp != nil || p.fab.waiting) {
		return false
	}
	return p.threads.othersRunning()
}

// await is p.wake.Wait, counted so that a thread a broadcast woke counts
// as about to act until it has the lock again (threads.go).
func (p *process) await() {
	p.threads.enterWait()
	p.wake.Wait()
	p.threads.leaveWait()
}

// nap sleeps d with the lock released: a thread that would wait
// looks again later. It counts as a wait: a thread whose nap spans a
// step of the world counts as about to act, as one that await woke does
// (what it waits for may have come), until it has the lock again.
func (p *process) nap(d time.Duration) {
	p.threads.enterWait()
	p.mu.Unlock()
	time.Sleep(d)
	p.mu.Lock()
	p.threads.leaveWait()
}

// wakeAll is p.wake.Broadcast: every thread in await is woken, and every
// thread in nap counts as woken.
func (p *process) wakeAll() {
	p.threads.wokeAll()
	p.wake.Broadcast()
}

// stepWorld runs the process's own world to its next event.
func (p *process) stepWorld() bool {
	s := p.w.Scheduler()
	if s.Pending() == 0 {
		return false
	}
	if err := p.w.RunTo(s.NextAt()); err != nil {
		p.fatal(err)
	}
	p.settle()
	return true
}

// fatal ends the program when the world cannot go on: a run that never
// settles (rxe's retry_cnt 7 retries forever) ends as `rocesim run` ends
// one, with exit status 3 and what kept it going.
func (p *process) fatal(err error) {
	var runaway *verbs.RunawayError
	if errors.As(err, &runaway) {
		fmt.Fprintf(p.stderr, "rocesim: the run did not settle within %d events (virtual time %v): %s\n"+
			"rocesim: allow more with ROCESIM_MAX_EVENTS\n", runaway.Events, runaway.At, runaway.Why())
	} else {
		fmt.Fprintf(p.stderr, "rocesim: %v\n", err)
	}
	p.shutdown()
	p.exit(3)
}

// settle collects asynchronous events, sets every descriptor's state and
// wakes the waiters: something may have happened.
func (p *process) settle() {
	for _, d := range p.devs {
		for {
			ev, ok := d.admin.GetAsyncEvent()
			if !ok {
				break
			}
			a, owner, ok := p.asyncOf(d, ev)
			if !ok {
				continue
			}
			for _, c := range p.ctxs {
				// An event about a QP, CQ or SRQ goes to the context
				// that made it; a port's or the device's to every
				// context open on the device (as the kernel's
				// ib_uverbs_event_handler does).
				if c == owner || (owner == nil && c.dev == d) {
					c.async = append(c.async, a)
				}
			}
		}
	}
	for _, ch := range p.chs {
		if n := ch.ch.Pending(); n > ch.pending {
			ch.armed = false // an event came
		}
		ch.pending = ch.ch.Pending()
		if want := ch.ch.Pending() > 0; want != ch.signalled {
			p.fds.set(ch.fd, want)
			ch.signalled = want
		}
	}
	for _, c := range p.ctxs {
		if want := len(c.async) > 0; want != c.signalled {
			p.fds.set(c.asyncFD, want)
			c.signalled = want
		}
	}
	p.settleCM() // rdma_cm's event channels (cm.go)
	p.wakeAll()
}

// asyncOf names the program's object an event is about and the context
// it belongs to (nil for a port's or the device's event); false for an
// event about an object the program has destroyed meanwhile, which
// nobody gets.
func (p *process) asyncOf(d *device, ev verbs.AsyncEvent) (asyncEvent, *devContext, bool) {
	a := asyncEvent{typ: ev.Type, port: ev.Port}
	var owner *devContext
	switch {
	case ev.QP != nil:
		for _, q := range d.qps {
			if q.q.Is(ev.QP) {
				a.element, owner = q.c, q.ctx
			}
		}
	case ev.CQ != nil:
		for _, q := range d.cqs {
			if q.q.Is(ev.CQ) {
				a.element, owner = q.c, q.ctx
			}
		}
	case ev.SRQ != nil:
		for _, s := range d.srqs {
			if s.s.Is(ev.SRQ) {
				a.element, owner = s.c, s.ctx
			}
		}
	}
	return a, owner, owner != nil || (ev.QP == nil && ev.CQ == nil && ev.SRQ == nil)
}

// shutdown writes out the capture (at exit, or before a fatal end).
func (p *process) shutdown() {
	if p.closed {
		return
	}
	p.closed = true
	if p.fab != nil {
		p.farewellCM()
		p.fab.port.Close()
	}
	if p.tap != nil {
		if err := p.tap.Close(); err != nil {
			fmt.Fprintf(p.stderr, "rocesim: ROCESIM_PCAP: %v\n", err)
		}
	}
	if p.tr != nil {
		if err := writeLadder(p.cfg.Ladder, p.tr, p.cfg); err != nil {
			fmt.Fprintf(p.stderr, "rocesim: ROCESIM_LADDER: %v\n", err)
		}
	}
	p.reportFaults()
}

// reportFaults says on stderr what each rule of ROCESIM_FAULTS did by
// the time the program ended: a user who asked for "drop psn=102 tx=1"
// learns whether the run lost that packet, and a rule that never matched
// (a PSN the program never reached, a misspelt key value) is a warning,
// as rocesim run gives one for a scenario's rule.
func (p *process) reportFaults() {
	if p.cfg.Plan == nil || p.w == nil {
		return
	}
	fab := p.w.Fabric()
	for _, r := range p.cfg.Plan.Report(fab.RuleHits) {
		fmt.Fprintf(p.stderr, "rocesim: %s\n", r.Line("ROCESIM_FAULTS"))
	}
	if n := fab.TxEvictions(); n > 0 {
		fmt.Fprintf(p.stderr, "rocesim: warning: ROCESIM_FAULTS: %s\n", faults.TxEvictionWarning(n))
	}
}

// writeLadder draws the run's ladder into path: SVG for a name ending in
// .svg, text otherwise.
func writeLadder(path string, tr *sim.Trace, cfg Config) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if strings.HasSuffix(strings.ToLower(path), ".svg") {
		err = ladder.SVG(f, tr, ladder.Options{}, fmt.Sprintf("rocesim drop-in (seed %d, %v)", cfg.Seed, cfg.Profile))
	} else {
		err = ladder.Text(f, tr, ladder.Options{})
		if err == nil && tr.Full() {
			_, err = fmt.Fprintf(f, "(the ladder shows the first %d events: the trace keeps no more)\n", len(tr.Events()))
		}
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// ---- contexts ----

func (p *process) open(dev int) (uint32, int, syscall.Errno) {
	if dev < 0 || dev >= len(p.devs) {
		return 0, -1, syscall.ENODEV
	}
	d := p.devs[dev]
	c, err := d.host.GetDeviceList()[0].Open()
	if err != nil {
		return 0, -1, errnoOf(err)
	}
	fd, err := p.fds.open()
	if err != nil {
		return 0, -1, errnoOf(err)
	}
	ctx := &devContext{dev: d, c: c, asyncFD: fd}
	p.ctxs = append(p.ctxs, ctx)
	p.settle()
	return p.add(ctx), fd, 0
}

func (p *process) close(h uint32) syscall.Errno {
	ctx, ok := object[*devContext](p, h)
	if !ok {
		return syscall.EINVAL
	}
	if err := ctx.c.Close(); err != nil {
		return errnoOf(err)
	}
	p.fds.close(ctx.asyncFD)
	p.ctxs = without(p.ctxs, ctx)
	// The context's channels keep their fds until the program destroys
	// them (ibv_destroy_comp_channel): it may still hold or poll them, and
	// a closed number could come back as another file of its own.
	ctx.closed = true
	p.drop(h)
	return 0
}

// getAsyncEvent takes the context's next asynchronous event, running the
// world until there is one unless nonblock.
func (p *process) getAsyncEvent(h uint32, nonblock bool) (asyncEvent, syscall.Errno) {
	ctx, ok := object[*devContext](p, h)
	if !ok {
		return asyncEvent{}, syscall.EINVAL
	}
	for len(ctx.async) == 0 {
		if nonblock {
			return asyncEvent{}, syscall.EAGAIN
		}
		if !p.waitStep(false) {
			p.await() // nothing will happen until another thread acts
		}
	}
	ev := ctx.async[0]
	ctx.async = ctx.async[1:]
	p.settle()
	return ev, 0
}

// ---- PDs and MRs ----

func (p *process) allocPD(h uint32) (uint32, syscall.Errno) {
	ctx, ok := object[*devContext](p, h)
	if !ok {
		return 0, syscall.EINVAL
	}
	v, err := ctx.c.AllocPD()
	if err != nil {
		return 0, errnoOf(err)
	}
	return p.add(&pd{ctx: ctx, p: v}), 0
}

func (p *process) deallocPD(h uint32) syscall.Errno {
	return destroy(p, h, func(v *pd) error { return v.p.Dealloc() })
}

// regMR registers buf, which the program names at va.
func (p *process) regMR(h uint32, buf []byte, va uint64, access verbs.AccessFlags) (uint32, *memRegion, syscall.Errno) {
	v, ok := object[*pd](p, h)
	if !ok {
		return 0, nil, syscall.EINVAL
	}
	var mr *verbs.MR
	var err error
	if p.fab != nil {
		// On a fabric the peer is another process, which names this
		// program's addresses as the program sent them: the MR lives
		// there (fabric.go).
		mr, err = v.p.RegMRAt(buf, va, access)
	} else {
		mr, err = v.p.RegMR(buf, access)
	}
	if err != nil {
		return 0, nil, errnoOf(err)
	}
	m := &memRegion{dev: v.ctx.dev, mr: mr, va: va, length: uint64(len(buf))}
	v.ctx.dev.keys[mr.LKey] = m
	v.ctx.dev.mrs = append(v.ctx.dev.mrs, m)
	return p.add(m), m, 0
}

// reregMR changes an MR in place (ibv_rereg_mr): with a new translation
// the program names it at va from now on, and the world at a new
// simulated address; its keys stay.
func (p *process) reregMR(h uint32, flags verbs.ReregFlags, pdh uint32, buf []byte, va uint64, access verbs.AccessFlags) syscall.Errno {
	m, ok := object[*memRegion](p, h)
	if !ok {
		return syscall.EINVAL
	}
	var npd *verbs.PD
	if flags&verbs.ReregChangePD != 0 {
		v, ok := object[*pd](p, pdh)
		if !ok {
			return syscall.EINVAL
		}
		npd = v.p
	}
	if err := m.mr.Rereg(flags, npd, buf, access); err != nil {
		return errnoOf(err)
	}
	if flags&verbs.ReregChangeTranslation != 0 {
		m.va, m.length = va, uint64(len(buf))
	}
	return 0
}

func (p *process) deregMR(h uint32) syscall.Errno {
	return destroy(p, h, func(m *memRegion) error {
		if err := m.mr.Dereg(); err != nil {
			return err
		}
		delete(m.dev.keys, m.mr.LKey)
		m.dev.mrs = without(m.dev.mrs, m)
		return nil
	})
}

// worldAddr translates an address the program names in an MR of d by
// key into the world's: the MR's simulated address plus the offset. An
// address outside the MR keeps its offset, so the device refuses it as
// rxe would. Under a key no MR of d has, the address is taken to the
// first MR (in registration order) that holds it: the wire then shows
// the same VA on every run, not the program's heap address, and the
// device refuses the key.
func worldAddr(d *device, key uint32, addr uint64) uint64 {
	if d == nil {
		return addr
	}
	m := d.keys[key]
	if m == nil {
		m = d.windows[key] // an R_Key of a memory window
	}
	if m == nil {
		for _, r := range d.mrs {
			if addr-r.va < r.length {
				m = r
				break
			}
		}
	}
	if m == nil {
		return addr
	}
	return m.mr.Addr + (addr - m.va)
}

// ---- channels and CQs ----

func (p *process) createCompChannel(h uint32) (int, syscall.Errno) {
	ctx, ok := object[*devContext](p, h)
	if !ok {
		return -1, syscall.EINVAL
	}
	fd, err := p.fds.open()
	if err != nil {
		return -1, errnoOf(err)
	}
	ch := ctx.c.CreateCompChannel()
	if ch == nil {
		p.fds.close(fd)
		return -1, syscall.EINVAL
	}
	p.chs = append(p.chs, &channel{ctx: ctx, ch: ch, fd: fd})
	return fd, 0
}

func (p *process) channelByFD(fd int) *channel {
	for _, ch := range p.chs {
		if ch.fd == fd {
			return ch
		}
	}
	return nil
}

func (p *process) destroyCompChannel(fd int) syscall.Errno {
	ch := p.channelByFD(fd)
	if ch == nil {
		return syscall.EINVAL
	}
	if !ch.ctx.closed { // closing the context destroyed it already
		if err := ch.ch.Destroy(); err != nil {
			return errnoOf(err)
		}
	}
	p.chs = without(p.chs, ch)
	p.fds.close(fd)
	return 0
}

func (p *process) createCQ(h uint32, cqe, chFD, vector int, c unsafe.Pointer) (uint32, int, syscall.Errno) {
	ctx, ok := object[*devContext](p, h)
	if !ok {
		return 0, 0, syscall.EINVAL
	}
	var ch *channel
	var vch *verbs.CompChannel
	if chFD >= 0 {
		if ch = p.channelByFD(chFD); ch == nil {
			return 0, 0, syscall.EINVAL
		}
		vch = ch.ch
	}
	q, err := ctx.c.CreateCQ(cqe, vch, vector)
	if err != nil {
		return 0, 0, errnoOf(err)
	}
	v := &cq{ctx: ctx, q: q, c: c, ch: ch}
	ctx.dev.cqs = append(ctx.dev.cqs, v)
	return p.add(v), q.CQE(), 0
}

// destroyCQ destroys the CQ once every event the program read from its
// channel is acknowledged: rdma-core's ibv_cmd_destroy_cq waits until
// the acknowledged equal the comp_events_reported the kernel returns,
// which counts the events read, not those queued and never read (on
// rxe: conformance TestDestroyCQWithEventsRXE). Another thread's
// ack_cq_events ends the wait; a program with none waits forever, as
// with libibverbs.
func (p *process) destroyCQ(h uint32) syscall.Errno {
	if v, ok := object[*cq](p, h); ok {
		for v.unacked > 0 && !p.closed {
			p.await()
		}
	}
	err := destroy(p, h, func(v *cq) error {
		if err := v.q.Destroy(); err != nil {
			return err
		}
		v.ctx.dev.cqs = without(v.ctx.dev.cqs, v)
		return nil
	})
	p.settle()
	return err
}

// poll takes up to len(wcs) completions; when there are none it runs the
// world to its next event and looks again: a program that polls is
// waiting, and only waiting moves virtual time (unless
// ROCESIM_POLL_WAIT=off: then it returns 0).
func (p *process) poll(h uint32, wcs []verbs.WC) (int, syscall.Errno) {
	v, ok := object[*cq](p, h)
	if !ok {
		return 0, syscall.EINVAL
	}
	n := v.q.Poll(wcs)
	if n == 0 && len(wcs) > 0 && !p.cfg.PollNoWait && p.waitStep(true) {
		n = v.q.Poll(wcs)
	}
	if n == 0 {
		p.threads.polled()
	}
	return n, 0
}

// getCQEvent takes the channel's next event, running the world until
// there is one unless nonblock (the program set O_NONBLOCK on the fd:
// libibverbs' read then fails with EAGAIN).
func (p *process) getCQEvent(fd int, nonblock bool) (unsafe.Pointer, syscall.Errno) {
	ch := p.channelByFD(fd)
	if ch == nil {
		return nil, syscall.EINVAL
	}
	if e := p.waitFor(func() bool { return ch.ch.Pending() > 0 }, func() bool { return p.channelByFD(fd) == ch }, nonblock); e != 0 {
		return nil, e
	}
	q, _ := ch.ch.GetCQEvent()
	p.settle()
	for _, c := range ch.ctx.dev.cqs {
		if c.q == q {
			c.unacked++
			return c.c, 0
		}
	}
	return nil, syscall.EINVAL
}

// ---- QPs ----

// qpInit is ibv_qp_init_attr with handles for the CQs and the SRQ.
type qpInit struct {
	sendCQ, recvCQ, srq uint32
	cap                 verbs.QPCap
	typ                 verbs.QPType
	sigAll              bool
}

func (p *process) createQP(h uint32, ia qpInit, c unsafe.Pointer) (uint32, uint32, verbs.QPCap, syscall.Errno) {
	v, ok := object[*pd](p, h)
	if !ok {
		return 0, 0, verbs.QPCap{}, syscall.EINVAL
	}
	a := verbs.QPInitAttr{Cap: ia.cap, Type: ia.typ, SQSigAll: ia.sigAll}
	for _, o := range []struct {
		h   uint32
		dst **verbs.CQ
	}{{ia.sendCQ, &a.SendCQ}, {ia.recvCQ, &a.RecvCQ}} {
		if o.h != 0 {
			q, ok := object[*cq](p, o.h)
			if !ok {
				return 0, 0, verbs.QPCap{}, syscall.EINVAL
			}
			*o.dst = q.q
		}
	}
	if ia.srq != 0 {
		s, ok := object[*srq](p, ia.srq)
		if !ok {
			return 0, 0, verbs.QPCap{}, syscall.EINVAL
		}
		a.SRQ = s.s
	}
	q, err := v.p.CreateQP(a)
	if err != nil {
		return 0, 0, verbs.QPCap{}, errnoOf(err)
	}
	e := &qp{ctx: v.ctx, q: q, typ: ia.typ, c: c}
	v.ctx.dev.qps = append(v.ctx.dev.qps, e)
	_, init := q.Query()
	return p.add(e), q.QPNum, init.Cap, 0
}

func (p *process) modifyQP(h uint32, attr *verbs.QPAttr, mask verbs.QPAttrMask) (verbs.QPState, syscall.Errno) {
	v, ok := object[*qp](p, h)
	if !ok {
		return 0, syscall.EINVAL
	}
	if mask&verbs.QPAttrAV != 0 {
		p.addNeighbour(attr.AHAttr.GRH.DGID)
	}
	if err := v.q.Modify(attr, mask); err != nil {
		return v.q.State(), errnoOf(err)
	}
	if mask&verbs.QPAttrAV != 0 {
		v.remote = p.deviceByGID(attr.AHAttr.GRH.DGID)
	}
	p.poke()
	return v.q.State(), 0
}

func (p *process) queryQP(h uint32) (verbs.QPAttr, nic.QPInitAttr, syscall.Errno) {
	v, ok := object[*qp](p, h)
	if !ok {
		return verbs.QPAttr{}, nic.QPInitAttr{}, syscall.EINVAL
	}
	a, i := v.q.Query()
	return a, i, 0
}

// mcast attaches (attach) or detaches QP h to or from the multicast
// group gid (ibv_attach_mcast, ibv_detach_mcast).
func (p *process) mcast(h uint32, gid netip.Addr, lid uint16, attach bool) syscall.Errno {
	v, ok := object[*qp](p, h)
	if !ok {
		return syscall.EINVAL
	}
	if attach && p.udpTransport() {
		return syscall.EOPNOTSUPP // see udpTransport
	}
	if attach {
		return errnoOf(v.q.AttachMcast(gid, lid))
	}
	return errnoOf(v.q.DetachMcast(gid, lid))
}

func (p *process) destroyQP(h uint32) syscall.Errno {
	return destroy(p, h, func(v *qp) error {
		if err := v.q.Destroy(); err != nil {
			return err
		}
		v.ctx.dev.qps = without(v.ctx.dev.qps, v)
		return nil
	})
}

// sendWR is one ibv_send_wr as the C side read it: addresses as the
// program names them, inline data copied out of its memory.
type sendWR struct {
	wr     verbs.SendWR
	ah     uint32
	inline []byte // the bytes of the SGEs, for IBV_SEND_INLINE
	// IBV_WR_BIND_MW: the window and region (handles), the rest in
	// wr.BindMW.
	mw, bindMR uint32
}

// postSend posts one work request. Addresses become the world's: the
// local ones by L_Key in this device's MRs, the remote one by R_Key in
// the MRs of the device the QP's AV names. Inline data, which need not
// lie in an MR, is copied into the context's bounce MR and posted from
// there (the device copies inline data at the post, as rxe does).
func (p *process) postSend(h uint32, w *sendWR) syscall.Errno {
	v, ok := object[*qp](p, h)
	if !ok {
		return syscall.EINVAL
	}
	wr, region, e := p.prepareSend(v, w)
	if e != 0 {
		return e
	}
	_, err := v.q.PostSend([]verbs.SendWR{wr})
	p.poke()
	if err == nil && w.mw != 0 {
		// The R_Key the WR gives the window opens the region from now
		// on (before the bind completes, a peer's use of it fails at
		// the device anyway).
		p.bound(v.ctx.dev, wr.BindMW.RKey, region)
	}
	return errnoOf(err)
}

// prepareSend turns w, a WR for QP v, into the model's: its AH and
// memory window found by handle, a type 2 bind's region, inline data in
// the context's bounce buffer, addresses taken to the world's.
func (p *process) prepareSend(v *qp, w *sendWR) (verbs.SendWR, *memRegion, syscall.Errno) {
	d := v.ctx.dev
	wr := w.wr
	var region *memRegion // what a type 2 bind opens
	if w.ah != 0 {
		a, ok := object[*ah](p, w.ah)
		if !ok {
			return wr, nil, syscall.EINVAL
		}
		wr.AH = a.a
	}
	if w.mw != 0 {
		m, ok := object[*mw](p, w.mw)
		if !ok {
			return wr, nil, syscall.EINVAL
		}
		wr.BindMW.MW = m.m
		var err syscall.Errno
		if region, err = p.bindRegion(w.bindMR, &wr.BindMW.BindInfo); err != 0 {
			return wr, nil, err
		}
	}
	if w.inline != nil {
		b, err := p.bounce(v.ctx)
		if err != 0 {
			return wr, nil, err
		}
		if len(w.inline) <= len(b.mr.Bytes()) {
			copy(b.mr.Bytes(), w.inline)
			wr.SGList = []verbs.SGE{{Addr: b.mr.Addr, Length: uint32(len(w.inline)), LKey: b.mr.LKey}}
		}
	} else {
		for i := range wr.SGList {
			s := &wr.SGList[i]
			s.Addr = worldAddr(d, s.LKey, s.Addr)
		}
	}
	switch wr.Opcode {
	case verbs.WRRDMAWrite, verbs.WRRDMAWriteWithImm, verbs.WRRDMARead, verbs.WRAtomicCmpAndSwp, verbs.WRAtomicFetchAndAdd:
		wr.RemoteAddr = worldAddr(v.remote, wr.RKey, wr.RemoteAddr)
	}
	return wr, region, 0
}

// bindRegion fills a bind's region from the MR of handle h (0: none, an
// unbind), with the address taken to the world's.
func (p *process) bindRegion(h uint32, b *verbs.BindInfo) (*memRegion, syscall.Errno) {
	if h == 0 {
		return nil, 0
	}
	m, ok := object[*memRegion](p, h)
	if !ok {
		return nil, syscall.EINVAL
	}
	b.MR = m.mr
	b.Addr = worldAddr(m.dev, m.mr.LKey, b.Addr)
	return m, 0
}

// bound notes that R_Key rkey of device d now opens region (nil: none).
func (p *process) bound(d *device, rkey uint32, region *memRegion) {
	if region == nil {
		delete(d.windows, rkey)
		return
	}
	d.windows[rkey] = region
}

func (p *process) allocMW(h uint32, t verbs.MWType) (uint32, uint32, syscall.Errno) {
	v, ok := object[*pd](p, h)
	if !ok {
		return 0, 0, syscall.EINVAL
	}
	m, err := v.p.AllocMW(t)
	if err != nil {
		return 0, 0, errnoOf(err)
	}
	return p.add(&mw{pd: v, m: m}), m.RKey, 0
}

func (p *process) deallocMW(h uint32) syscall.Errno {
	return destroy(p, h, func(v *mw) error { return v.m.Dealloc() })
}

// bindMW binds a type 1 window (ibv_bind_mw) and returns its new R_Key.
func (p *process) bindMW(qh, mh uint32, b verbs.MWBind, mrh uint32) (uint32, syscall.Errno) {
	q, ok := object[*qp](p, qh)
	if !ok {
		return 0, syscall.EINVAL
	}
	m, ok := object[*mw](p, mh)
	if !ok {
		return 0, syscall.EINVAL
	}
	region, e := p.bindRegion(mrh, &b.BindInfo)
	if e != 0 {
		return m.m.RKey, e
	}
	err := q.q.BindMW(m.m, b)
	p.poke()
	if err != nil {
		return m.m.RKey, errnoOf(err)
	}
	p.bound(q.ctx.dev, m.m.RKey, region)
	return m.m.RKey, 0
}

// bounce returns the context's MR for inline data, registering it on
// first use (in a PD of its own: it counts against max_pd and max_mr).
func (p *process) bounce(ctx *devContext) (*memRegion, syscall.Errno) {
	if ctx.bounce != nil {
		return ctx.bounce, 0
	}
	pdv, err := ctx.c.AllocPD()
	if err != nil {
		return nil, errnoOf(err)
	}
	mr, err := pdv.RegMR(make([]byte, 64<<10), verbs.AccessLocalWrite)
	if err != nil {
		return nil, errnoOf(err)
	}
	ctx.bouncePD, ctx.bounce = pdv, &memRegion{dev: ctx.dev, mr: mr}
	return ctx.bounce, 0
}

// postRecv posts one receive work request to a QP (h) or an SRQ.
func (p *process) postRecv(h uint32, wr verbs.RecvWR) syscall.Errno {
	var err error
	if h == 0 || int(h) >= len(p.objs) {
		return syscall.EINVAL
	}
	switch v := p.objs[h].(type) {
	case *qp:
		translateRecv(v.ctx.dev, &wr)
		_, err = v.q.PostRecv([]verbs.RecvWR{wr})
	case *srq:
		translateRecv(v.ctx.dev, &wr)
		_, err = v.s.PostRecv([]verbs.RecvWR{wr})
	default:
		return syscall.EINVAL
	}
	p.poke()
	return errnoOf(err)
}

func translateRecv(d *device, wr *verbs.RecvWR) {
	for i := range wr.SGList {
		s := &wr.SGList[i]
		s.Addr = worldAddr(d, s.LKey, s.Addr)
	}
}

// ---- SRQs and AHs ----

func (p *process) createSRQ(h uint32, attr verbs.SRQAttr, c unsafe.Pointer) (uint32, syscall.Errno) {
	v, ok := object[*pd](p, h)
	if !ok {
		return 0, syscall.EINVAL
	}
	s, err := v.p.CreateSRQ(attr)
	if err != nil {
		return 0, errnoOf(err)
	}
	e := &srq{ctx: v.ctx, s: s, c: c}
	v.ctx.dev.srqs = append(v.ctx.dev.srqs, e)
	return p.add(e), 0
}

func (p *process) destroySRQ(h uint32) syscall.Errno {
	return destroy(p, h, func(v *srq) error {
		if err := v.s.Destroy(); err != nil {
			return err
		}
		v.ctx.dev.srqs = without(v.ctx.dev.srqs, v)
		return nil
	})
}

func (p *process) createAH(h uint32, attr verbs.AHAttr) (uint32, syscall.Errno) {
	v, ok := object[*pd](p, h)
	if !ok {
		return 0, syscall.EINVAL
	}
	p.addNeighbour(attr.GRH.DGID)
	a, err := v.p.CreateAH(attr)
	if err != nil {
		return 0, errnoOf(err)
	}
	return p.add(&ah{pd: v, a: a, remote: p.deviceByGID(attr.GRH.DGID)}), 0
}

func (p *process) destroyAH(h uint32) syscall.Errno {
	return destroy(p, h, func(v *ah) error { return v.a.Destroy() })
}

// osExit is os.Exit, the process's default exit.
var osExit = os.Exit

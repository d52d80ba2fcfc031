package verbstest

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/rocesim/rocesim/faults"
	"github.com/rocesim/rocesim/rdmacm"
	"github.com/rocesim/rocesim/sim"
	"github.com/rocesim/rocesim/sim/fabric"
	"github.com/rocesim/rocesim/verbs"
	"github.com/rocesim/rocesim/wire/capture"
)

// TB is the part of testing.TB the toolkit uses. *testing.T, *testing.B
// and *testing.F satisfy it, and so does a Recorder outside go test.
type TB interface {
	Helper()
	Name() string
	Cleanup(func())
	Logf(format string, args ...any)
	Errorf(format string, args ...any)
	FailNow()
	Failed() bool
}

// Options describe a test's world. The zero value is two hosts, "a" and
// "b", on one 100 Gb/s link, seed 1, the rxe profile and no faults.
type Options struct {
	// Seed is the master seed. 0 means the -rocesim.seed flag's value,
	// or 1 without it: a test that leaves the seed alone runs under any
	// seed the command line asks for, while one that fixes its seed (its
	// assertions may depend on it) keeps it. Seeds hands out seeds that
	// the flag picks from.
	Seed uint64
	// Profile is the NIC behaviour profile; the zero value is rxe's.
	Profile verbs.Profile
	// Nodes names the hosts, in order; nil means {"a", "b"}. Host i gets
	// IPv4 10.0.0.i+1 (see verbs.World.AddHost).
	Nodes []string
	// Switch joins the hosts through one switch named "sw" (links
	// "a-sw", "b-sw", ...). Two hosts are otherwise joined by one link
	// ("a-b"); more than two always use a switch.
	Switch bool
	// Link describes every link; zero fields take the defaults.
	Link Link
	// Faults is the initial fault plan in the text form of package
	// faults ("drop psn=2 tx=1"; rules separated by newlines or ';',
	// faults.ParseInline); Plan is the same built in Go. Give at
	// most one. SetFaults, AddFaults and SetPlan change it later.
	Faults string
	Plan   *faults.Plan
	// MaxFrames is how many frame records the world keeps for Frames
	// and RequireFrames (each a copy of the frame, up to about 1.5 KB);
	// 0 means 1<<16, some 100 MB at most. A test that sends more and
	// selects frames must raise it: once it is exceeded, Frames fails the
	// test rather than count a partial log.
	MaxFrames int
	// Limit bounds the virtual time each Run, Await or Require call may
	// spend before it fails the test; 0 means 10 s. It is what stops a
	// test whose QP retries forever (retry_cnt 7 is infinite in rxe).
	Limit sim.Duration
	// MaxEvents bounds the simulation events each Run, Await or Require
	// call may fire before it fails the test, saying what kept the world
	// busy (the QP, the PSN it retransmits and how often, the RNR NAKs);
	// 0 means DefaultMaxEvents. Where Limit bounds virtual time, this
	// bounds the work: a QP refused with RNR NAKs every 10 µs, or a fault
	// plan that copies every frame, stays busy for a long wall time
	// within a little virtual time. It is deterministic: the same test
	// fails at the same event whatever the machine's load.
	MaxEvents uint64
}

// DefaultMaxEvents is the event budget of each wait when
// Options.MaxEvents is 0: a fraction of a second of wall time.
const DefaultMaxEvents = 250_000

// Link describes the links of a world.
type Link struct {
	// Bandwidth in bits per second; 0 means 100 Gb/s.
	Bandwidth int64
	// Delay is the one-way propagation delay; 0 means 1 µs.
	Delay sim.Duration
	// MTU is the largest IP packet; 0 means 1500, which gives RoCE a
	// path MTU of 1024 as rxe picks on such a link.
	MTU int
}

// World is a test's simulated cluster: the hosts, the fabric, the fault
// plan and the clock, with a trace and a pcapng capture of everything.
// Virtual time moves only inside its Run, Await and Require methods.
// Like the test that owns it, it is used from one goroutine.
type World struct {
	t     TB
	opts  Options
	seed  uint64
	vw    *verbs.World
	hosts []*Host
	trace *sim.Trace
	limit sim.Duration
	// maxEvents is Options.MaxEvents or its default.
	maxEvents uint64

	dir     string // where the capture (and, on failure, the trace) is kept
	pcap    string
	capture capture.Writer

	plan    *faults.Plan
	history []reportLine
	loops   []reportLine // pollers paused or stopped

	frames    []Frame
	maxFrames int
	overflow  int // frames recorded after the log was full
	pollers   []*Poller
	psn       psnSource
	wake      wakeHandler
	names     names
	cm        *rdmacm.CM // made on first use (cm.go)
}

// reportLine is something the failure report lists with its time: a plan
// the world applied, a poller paused or stopped.
type reportLine struct {
	at   sim.Time
	text string
}

// New builds a world for t and registers its clean-up: the capture is
// closed when the test ends, and deleted if the test passed (unless
// -rocesim.keep); if it failed, the report (seed, plan, the command that
// re-runs it, the capture's path) is logged. Options that cannot be
// honoured fail the test at once.
func New(t TB, opts Options) *World {
	t.Helper()
	w := &World{t: t, opts: opts, seed: opts.Seed, trace: &sim.Trace{}, limit: opts.Limit}
	if w.seed == 0 {
		w.seed = 1
		if s := seedFlag(); s != 0 {
			w.seed = s
		}
	}
	if w.limit <= 0 {
		w.limit = 10 * sim.Second
	}
	w.maxFrames = opts.MaxFrames
	if w.maxFrames <= 0 {
		w.maxFrames = 1 << 16
	}
	w.maxEvents = opts.MaxEvents
	if w.maxEvents == 0 {
		w.maxEvents = DefaultMaxEvents
	}
	w.psn = newPSNSource(w.seed)
	w.names = names{cqs: map[*verbs.CQ]string{}, qps: map[*verbs.QP]string{}, perCQ: map[*Host]int{}}
	w.wake.w = w
	plan := opts.Plan
	if opts.Faults != "" {
		if plan != nil {
			t.Errorf("verbstest.New: give Options.Faults or Options.Plan, not both")
			t.FailNow()
		}
		plan = w.parse("verbstest.New: Options.Faults", opts.Faults)
	} else if err := plan.Validate(); err != nil {
		t.Errorf("verbstest.New: Options.Plan: %v", err)
		t.FailNow()
	}
	w.plan = plan
	w.history = append(w.history, reportLine{0, planText(plan)})

	dir, err := os.MkdirTemp("", "rocesim-"+fileSafe(t.Name())+"-")
	if err != nil {
		t.Errorf("verbstest.New: a directory for the capture: %v", err)
		t.FailNow()
	}
	w.dir = dir
	w.pcap = filepath.Join(dir, "capture.pcapng")
	w.capture, err = capture.Create(w.pcap, capture.PcapngOptions{
		Comment: fmt.Sprintf("verbstest %s, seed %d", t.Name(), w.seed)})
	if err != nil {
		t.Errorf("verbstest.New: %v", err)
		t.FailNow()
	}
	t.Cleanup(w.cleanup)

	link := fabric.DefaultLinkConfig()
	if opts.Link.Bandwidth != 0 {
		link.Bandwidth = opts.Link.Bandwidth
	}
	if opts.Link.Delay != 0 {
		link.Propagation = opts.Link.Delay
	}
	if opts.Link.MTU != 0 {
		link.MTU = opts.Link.MTU
	}
	w.vw = verbs.NewWorld(verbs.WorldConfig{Seed: w.seed, Plan: plan, Trace: w.trace, Capture: w.capture,
		Profile: opts.Profile, Link: link, Observe: w.observe, CountTx: true})

	names := opts.Nodes
	if names == nil {
		names = []string{"a", "b"}
	}
	if len(names) < 1 {
		w.fatalf("verbstest.New: Options.Nodes is empty")
	}
	for i, name := range names {
		if !validHostName(name) || indexOf(names[:i], name) >= 0 {
			w.fatalf("verbstest.New: host name %q is empty, repeated or unusable in a fault plan (letters, digits and _ . : / - only)", name)
		}
		w.hosts = append(w.hosts, newHost(w, w.vw.AddHost(name)))
	}
	switch {
	case len(w.hosts) == 2 && !opts.Switch:
		err = w.vw.Connect(w.hosts[0].Host, w.hosts[1].Host)
		w.hosts[0].link = names[0] + "-" + names[1]
		w.hosts[1].link = w.hosts[0].link
	case len(w.hosts) >= 2:
		err = w.vw.ConnectSwitch()
		for _, h := range w.hosts {
			h.link = h.Name() + "-sw"
		}
	}
	if err != nil {
		w.fatalf("verbstest.New: %v", err)
	}
	for _, h := range w.hosts {
		h.open()
	}
	return w
}

// fatalf fails the test now with a message.
func (w *World) fatalf(format string, args ...any) {
	w.t.Helper()
	w.t.Errorf(format, args...)
	w.t.FailNow()
}

// T returns the TB the world's methods fail: the one New was given, or
// With's inside With. Helpers that take a TB can be given it.
func (w *World) T() TB { return w.t }

// Seed returns the world's master seed (after -rocesim.seed).
func (w *World) Seed() uint64 { return w.seed }

// Now returns the current virtual time.
func (w *World) Now() sim.Time { return w.vw.Now() }

// Verbs returns the underlying verbs.World, for what the toolkit does not
// wrap (its fabric's link statistics, its scheduler). Running it directly
// skips the pollers.
func (w *World) Verbs() *verbs.World { return w.vw }

// Trace returns the structured event log of the run so far: frames,
// fault decisions, QP state changes, completions. Two runs of the same
// test with the same seed give the same trace.
func (w *World) Trace() *sim.Trace { return w.trace }

// PcapngPath returns the path of the capture file. Every frame of the
// run is written there with a comment saying why it exists; the file is
// complete once the test has ended (it is flushed at clean-up), and kept
// only if the test failed or -rocesim.keep was given.
func (w *World) PcapngPath() string { return w.pcap }

// CaptureBytes returns the capture written so far, as the pcapng file
// holds it once flushed: what a test compares to check that two runs put
// the same bytes on the wire.
func (w *World) CaptureBytes() []byte {
	w.t.Helper()
	if err := w.capture.Flush(); err != nil {
		w.fatalf("verbstest: flushing the capture: %v", err)
	}
	b, err := os.ReadFile(w.pcap)
	if err != nil {
		w.fatalf("verbstest: reading the capture: %v", err)
	}
	return b
}

// Host returns the host named name; it fails the test if there is none.
func (w *World) Host(name string) *Host {
	w.t.Helper()
	for _, h := range w.hosts {
		if h.Name() == name {
			return h
		}
	}
	w.fatalf("verbstest: no host %q (hosts: %s)", name, strings.Join(w.hostNames(), ", "))
	return nil
}

// Hosts returns the hosts in the order of Options.Nodes.
func (w *World) Hosts() []*Host { return w.hosts }

func (w *World) hostNames() []string {
	names := make([]string, len(w.hosts))
	for i, h := range w.hosts {
		names[i] = h.Name()
	}
	return names
}

// Host is a machine of the world with its device opened: a context and a
// protection domain ready for the test's resources.
type Host struct {
	*verbs.Host
	// Ctx is the host's open device context (ibv_open_device).
	Ctx *verbs.Context
	// PD is a protection domain on Ctx (ibv_alloc_pd).
	PD   *verbs.PD
	w    *World
	link string
}

func newHost(w *World, h *verbs.Host) *Host { return &Host{Host: h, w: w} }

func (h *Host) open() {
	var err error
	if h.Ctx, err = h.GetDeviceList()[0].Open(); err != nil {
		h.w.fatalf("verbstest: open %s's device: %v", h.Name(), err)
	}
	if h.PD, err = h.Ctx.AllocPD(); err != nil {
		h.w.fatalf("verbstest: alloc_pd on %s: %v", h.Name(), err)
	}
}

// LinkName returns the name of the host's link, as a fault plan names it
// ("a-b", or "a-sw" through a switch): "down link=" + h.LinkName() cuts
// the host off.
func (h *Host) LinkName() string { return h.link }

// Buffer registers a zeroed buffer of n bytes in the host's PD with
// local write and remote read, write and atomic access, and returns its
// MR; MR.Bytes is the buffer.
func (h *Host) Buffer(n int) *verbs.MR {
	h.w.t.Helper()
	mr, err := h.PD.RegMR(make([]byte, n), verbs.AccessLocalWrite|verbs.AccessRemoteWrite|verbs.AccessRemoteRead|verbs.AccessRemoteAtomic)
	if err != nil {
		h.w.fatalf("verbstest: reg_mr of %d bytes on %s: %v", n, h.Name(), err)
	}
	return mr
}

// CQ creates a completion queue of n entries on the host. A failed
// Require names it "a's CQ #1", counting the host's CQs from one in the
// order they were made (Pair's among them).
func (h *Host) CQ(n int) *verbs.CQ {
	h.w.t.Helper()
	cq, err := h.Ctx.CreateCQ(n, nil, 0)
	if err != nil {
		h.w.fatalf("verbstest: create_cq of %d entries on %s: %v", n, h.Name(), err)
	}
	h.w.names.perCQ[h]++
	h.w.names.cqs[cq] = fmt.Sprintf("%s's CQ #%d", h.Name(), h.w.names.perCQ[h])
	return cq
}

// validHostName reports whether a fault plan can name the host.
func validHostName(s string) bool {
	if s == "" || s == "sw" {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("_.:/-", c)) {
			return false
		}
	}
	return true
}

func indexOf(s []string, v string) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return -1
}

// fileSafe turns a test name into a file name part.
func fileSafe(name string) string {
	b := []byte(name)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			b[i] = '_'
		}
	}
	if len(b) > 60 {
		b = b[:60]
	}
	return string(b)
}

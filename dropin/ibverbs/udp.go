package main

// The process's device on a real network (ROCESIM_TRANSPORT=udp): RoCE v2
// on a UDP socket bound to ROCESIM_ADDR port 4791 (realnet.UDP), in real
// time, so an unmodified program talks to another process on the drop-in
// library, to `rocesim node`, or to real rxe.
//
// It is the fabric's plumbing (fabric.go) with the daemon replaced by the
// socket and the wall clock: the world has one host added with
// verbs.World.AddPortHost, its frames go to udpPort.Send, and stepFabric
// waits in udpPort.Wait, which returns the frames the socket received and
// the frames it took, each at the wall-clock instant it happened (time
// since the port opened), and the instant it returns at. The world's
// clock then follows the wall clock: timers (ACK timeouts, RNR waits)
// fire in real time. A verb that finds the world behind the wall clock
// (the program computed or slept outside the verbs) catches up first
// (catchUp), so the frames it builds leave at the real instant and the
// timers it arms are armed from it.
//
// The device has no neighbour table to learn from (no ARP is modelled):
// a QP or AH whose destination GID is new gets realnet.StandInMAC of it,
// the MAC the transport writes as the source of that peer's frames and
// strips again on send (addNeighbour).

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/rocesim/rocesim/internal/will"
	"github.com/rocesim/rocesim/procfabric"
	"github.com/rocesim/rocesim/realnet"
	"github.com/rocesim/rocesim/sim"
	"github.com/rocesim/rocesim/verbs"
	"github.com/rocesim/rocesim/wire"
)

// nodePort is what stepFabric waits on: a procfabric.Port, or a udpPort.
type nodePort interface {
	Send(frame, note []byte) error
	Wait(deadline sim.Time) (*procfabric.Inputs, error)
	// PollWait is Wait for a poll_cq that found nothing (procfabric's
	// Port.PollWait).
	PollWait(deadline sim.Time) (*procfabric.Inputs, error)
	// SetTxSlack is procfabric's Port.SetTxSlack: the tx-dones the next
	// wait need not be woken for.
	SetTxSlack(n int)
	// SetRxSlack is Port.SetRxSlack: the frames the next wait need not
	// be woken for.
	SetRxSlack(rx []wire.PacketRun)
	Interrupt() error
	// Tick is Interrupt for the library's housekeeping (procfabric's
	// Port.Tick).
	Tick() error
	// Poll makes the wait another thread is in a poll's (procfabric's
	// Port.Poll).
	Poll() error
	Close() error
}

// maxQueued bounds the frames received and not yet taken by a Wait: a
// flood on port 4791 while the program does not wait costs dropped
// frames, never memory.
const maxQueued = 1024

// udpPort is the device's port on a realnet.UDP transport.
type udpPort struct {
	tr    *realnet.UDP
	start time.Time
	one   [1][]byte // Send's batch (Send runs under the process lock)
	kick  chan struct{}

	mu          sync.Mutex
	now         sim.Time // the last instant handed out: the clock never goes back
	in          procfabric.Inputs
	spare       []procfabric.Input // the previous Wait's events, given back
	free        [][]byte           // frame buffers for the reader
	interrupted bool
	closed      bool
	blocked     bool   // a Wait is blocked (Quiet)
	dropped     uint64 // frames dropped for a full queue

	// will is the pipe to the program's keeper (ROCESIM_WILL_FD: rocesim
	// exec), nil for none; SetWill and Close write it, under the
	// process lock. willBuf is the records being written.
	will    *os.File
	willBuf []byte
}

// parseAddr reads ROCESIM_ADDR: ip or ip:4791, loopback unless routable.
func parseAddr(s string, routable bool) (netip.Addr, error) {
	if s == "" {
		return netip.Addr{}, fmt.Errorf("ROCESIM_TRANSPORT=udp: ROCESIM_ADDR must give the device's IP address (e.g. 127.0.0.1)")
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		ap, perr := netip.ParseAddrPort(s)
		if perr != nil {
			return a, fmt.Errorf("ROCESIM_ADDR=%q: want an IPv4 or IPv6 address, optionally with :%d", s, wire.UDPPortRoCEv2)
		}
		if ap.Port() != wire.UDPPortRoCEv2 {
			// The device sends every packet to port 4791 (RoCE v2's), so a
			// peer's other port would never be reached.
			return a, fmt.Errorf("ROCESIM_ADDR=%q: the port must be %d, RoCE v2's: peers send there", s, wire.UDPPortRoCEv2)
		}
		a = ap.Addr()
	}
	if a.Zone() != "" || a.Is4In6() || a.IsUnspecified() {
		return a, fmt.Errorf("ROCESIM_ADDR=%q: want a specific IPv4 or IPv6 address", s)
	}
	if !a.IsLoopback() && !routable {
		return a, fmt.Errorf("ROCESIM_ADDR=%s is not a loopback address: set ROCESIM_ROUTABLE=1 to expose a RoCE endpoint there "+
			"(anyone who reaches UDP 4791 and guesses a QPN and R_Key reads and writes registered memory)", a)
	}
	return a, nil
}

// joinUDP binds the device's socket and builds the world's one host on it.
func (p *process) joinUDP() error {
	if p.cfg.Devices > 1 {
		return fmt.Errorf("ROCESIM_DEVICES=%d: a process on ROCESIM_TRANSPORT=udp has one device", p.cfg.Devices)
	}
	mac := realnet.StandInMAC(p.cfg.Addr)
	tr, err := realnet.NewUDP(realnet.UDPConfig{Addr: netip.AddrPortFrom(p.cfg.Addr, 0), MAC: mac,
		RecoverIPv4ID: true})
	if err != nil {
		return fmt.Errorf("ROCESIM_ADDR=%s: %w", p.cfg.Addr, err)
	}
	u := &udpPort{tr: tr, start: time.Now(), kick: make(chan struct{}, 1)}
	if p.cfg.WillFD > 2 { // 0: none (a Config made in Go); readConfig takes 3 and up
		// The program's own children do not inherit it: a keeper that
		// waits for the pipe's end would wait for them too.
		syscall.CloseOnExec(p.cfg.WillFD)
		u.will = os.NewFile(uintptr(p.cfg.WillFD), "rocesim-will")
	}
	self := verbs.HostAddr{MAC: mac}
	if p.cfg.Addr.Is4() {
		self.IPv4, self.IPv6 = p.cfg.Addr, verbs.LinkLocal(mac)
	} else {
		self.IPv6 = p.cfg.Addr
	}
	p.w = verbs.NewWorld(verbs.WorldConfig{Seed: p.cfg.Seed, Profile: p.cfg.Profile, MaxEvents: p.cfg.MaxEvents})
	p.fab = &fabricLink{port: u, where: "ROCESIM_ADDR " + p.cfg.Addr.String(), udp: u}
	p.fab.host = p.w.AddPortHost(deviceName(p.cfg.DevicePrefix, 0), self, 1, nil, p.sendFrame)
	p.devs = []*device{{name: deviceName(p.cfg.DevicePrefix, 0), host: p.fab.host, keys: map[uint32]*memRegion{}, windows: map[uint32]*memRegion{}}}
	go u.read()
	if err := p.openAdmin(); err != nil {
		u.Close()
		return err
	}
	return nil
}

// read moves received frames into the queue until the transport closes.
func (u *udpPort) read() {
	msgs := make([]realnet.Msg, u.tr.BatchSize())
	for i := range msgs {
		msgs[i].Buf = make([]byte, realnet.BufLen)
	}
	for {
		n, err := u.tr.Receive(msgs)
		if err != nil {
			return // closed
		}
		u.mu.Lock()
		now := u.clock()
		for _, m := range msgs[:n] {
			if len(u.in.Events) >= maxQueued {
				u.dropped++
				continue
			}
			var b []byte
			if k := len(u.free); k > 0 {
				b, u.free = u.free[k-1][:0], u.free[:k-1]
			}
			u.in.Events = append(u.in.Events, procfabric.Input{At: now, Frame: append(b, m.Buf[:m.N]...)})
		}
		u.mu.Unlock()
		u.poke()
	}
}

// clock is the wall-clock time since the port opened, never going back;
// the caller holds u.mu.
func (u *udpPort) clock() sim.Time {
	if t := sim.Time(time.Since(u.start)); t > u.now {
		u.now = t
	}
	return u.now
}

// Quiet returns the wall-clock instant the port stands at (clock), and
// whether a Wait is blocked with nothing received or sent since its
// caller last ran the world: then everything that happened before that
// instant has been handed out, what comes later is stamped later, and
// the world may be run to it without the waiter (catchUp).
func (u *udpPort) Quiet() (sim.Time, bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.clock(), u.blocked && len(u.in.Events) == 0
}

// poke wakes a Wait.
func (u *udpPort) poke() {
	select {
	case u.kick <- struct{}{}:
	default:
	}
}

// Send sends the frame; the socket taking it (or refusing it, dropped at
// the port) is the frame leaving the port, as in realnet.Driver.
func (u *udpPort) Send(frame, _ []byte) error {
	u.one[0] = frame
	_, err := u.tr.Send(u.one[:])
	u.one[0] = nil
	if err != nil && err != realnet.ErrRefused {
		return err // closed: the caller finishes the frame itself
	}
	u.mu.Lock()
	u.in.Events = append(u.in.Events, procfabric.Input{At: u.clock()})
	u.mu.Unlock()
	return nil
}

// Wait blocks until a frame came or left, Interrupt was called, or the
// wall clock reached deadline, and hands out what happened meanwhile.
// The frames of the previous Wait's events are reused: the caller is done
// with them.
func (u *udpPort) Wait(deadline sim.Time) (*procfabric.Inputs, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	for _, e := range u.spare {
		if e.Frame != nil {
			u.free = append(u.free, e.Frame)
		}
	}
	u.spare = u.spare[:0]
	for {
		if u.closed {
			return nil, net.ErrClosed
		}
		now := u.clock()
		if len(u.in.Events) > 0 || u.interrupted || deadline <= now {
			u.interrupted = false
			out := &procfabric.Inputs{Events: u.in.Events, Now: now}
			u.in.Events, u.spare = u.spare, out.Events
			return out, nil
		}
		var t *time.Timer
		var timeout <-chan time.Time
		if deadline != sim.Never {
			t = time.NewTimer(time.Duration(deadline - now))
			timeout = t.C
		}
		u.blocked = true
		u.mu.Unlock()
		select {
		case <-u.kick:
		case <-timeout:
		}
		if t != nil {
			t.Stop()
		}
		u.mu.Lock()
		u.blocked = false
	}
}

// udpPollSlice bounds a poll's wait in real time: a poll_cq that finds
// nothing returns 0 after it, as a real one returns at once, without the
// program spinning on the CPU meanwhile (its next poll waits again).
const udpPollSlice = sim.Millisecond

// PollWait is Wait for at most udpPollSlice: in real time nothing else
// ends the wait of a poll with no timer due (its deadline sim.Never),
// and a program may poll once more before it answers its peer on TCP
// (perftest's UD and UC bandwidth servers).
func (u *udpPort) PollWait(deadline sim.Time) (*procfabric.Inputs, error) {
	u.mu.Lock()
	now := u.clock()
	u.mu.Unlock()
	return u.Wait(min(deadline, now.Add(udpPollSlice)))
}

// SetTxSlack does nothing: a UDP port's tx-dones are the device's own
// (the socket takes a frame at once).
func (u *udpPort) SetTxSlack(int) {}

// SetRxSlack does nothing: a UDP port's frames come in real time.
func (u *udpPort) SetRxSlack([]wire.PacketRun) {}

// Poll ends the current or next Wait, as Interrupt does: in real time a
// poll that finds nothing returns 0 at once, and the clock has moved on
// when the program polls again.
func (u *udpPort) Poll() error { return u.Interrupt() }

// Tick is Interrupt: real time has no quiet report to spare.
func (u *udpPort) Tick() error { return u.Interrupt() }

// Interrupt makes the current or next Wait return at once.
func (u *udpPort) Interrupt() error {
	u.mu.Lock()
	u.interrupted = true
	u.mu.Unlock()
	u.poke()
	return nil
}

// SetWill hands the keeper (rocesim exec) the will's changes, the frames
// the CM's IDs would send if the program died now (renewWill): exec
// sends them from the device's address if the program ends without
// closing the device. Without a keeper it does nothing; a keeper gone
// (its pipe broken) is not asked again.
func (u *udpPort) SetWill(entries []procfabric.WillEntry) error {
	if u.will == nil {
		return nil
	}
	b := u.willBuf[:0]
	for _, e := range entries {
		b = will.Append(b, []will.Entry{{Key: e.Key, Frame: e.Frame}})
	}
	u.willBuf = b
	if _, err := u.will.Write(b); err != nil {
		u.will.Close()
		u.will = nil
	}
	return nil
}

// Close closes the socket and ends the reader; the keeper learns that
// the program closed its device itself (the void record), so it sends
// nothing for it.
func (u *udpPort) Close() error {
	u.mu.Lock()
	if u.closed {
		u.mu.Unlock()
		return net.ErrClosed
	}
	u.closed = true
	u.mu.Unlock()
	if u.will != nil {
		u.will.Write(will.AppendVoid(nil))
		u.will.Close()
		u.will = nil
	}
	u.poke()
	return u.tr.Close()
}

// catchUp brings the world to the wall clock before a verb acts, with
// what the socket received meanwhile; the caller holds p.mu. Also when
// another thread waits on the port (the idle loop while the program
// slept, a poller): its world stands at the last frame it took, and a
// verb acting there would arm its timers in the past, to fire as soon
// as the waiter caught up. A late rdma_accept sent its REP three times
// at once so: built at the instant of the REQ's resend, 9 s back, its
// resend timer (4096 ms, the REQ's local CM response timeout, rdmacm's
// repTimeout) ran out twice in the catch-up (TestLateAcceptUDP).
//
// A waiter blocked with nothing come (Quiet) is left waiting: the world
// runs to the instant here, and the waiter is woken only if a timer
// now falls before the deadline it waits for. Otherwise it is
// interrupted and this thread waits until it has run the world to the
// instant of the call, frames and all.
func (p *process) catchUp() {
	f := p.fab
	if f == nil || f.udp == nil || p.closed {
		return
	}
	now, quiet := f.udp.Quiet()
	if f.waiting && quiet {
		if err := p.w.RunTo(now); err != nil {
			p.fatal(err)
			return
		}
		if s := p.w.Scheduler(); s.Pending() > 0 && s.NextAt() < f.deadline {
			f.port.Interrupt()
		}
		p.settle()
		return
	}
	for !p.closed && p.w.Now() < now {
		f.udp.Interrupt()
		if !p.stepFabric(false) {
			return
		}
	}
}

// addNeighbour lists a destination GID with the device at its stand-in
// MAC (see the top of this file); a no-op but on the UDP transport.
func (p *process) addNeighbour(gid netip.Addr) {
	if p.fab == nil || p.fab.udp == nil || !gid.IsValid() || gid.Unmap().IsMulticast() {
		return // a group's MAC is the group's (wire.MulticastMAC)
	}
	p.fab.host.AddNeighbour(gid, realnet.StandInMAC(gid))
}

// udpTransport reports whether the process's device is on the real
// network (ROCESIM_TRANSPORT=udp). Multicast is refused there with
// EOPNOTSUPP (ibv_attach_mcast, rdma_join_multicast): the transport's
// socket joins no IP group, so a group's datagrams would never arrive,
// and a program waiting for them would wait for ever.
func (p *process) udpTransport() bool { return p.fab != nil && p.fab.udp != nil }

// transportOf reads ROCESIM_TRANSPORT ("" or "sim": the model's own
// world; "udp": the real network).
func transportOf(s string) (bool, error) {
	switch strings.ToLower(s) {
	case "", "sim":
		return false, nil
	case "udp":
		return true, nil
	}
	return false, fmt.Errorf("ROCESIM_TRANSPORT=%q: want udp (or sim, the default)", s)
}

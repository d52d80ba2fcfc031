package main

// The process's device on a fabric daemon (ROCESIM_FABRIC): two
// programs, each in its own process, talk through one simulated fabric
// in one virtual time (package procfabric).
//
// The world is the same as for a process on its own but has one host,
// added with verbs.World.AddPortHost: its frames go to the daemon
// (procfabric.Port.Send) instead of a switch of the world's own, and its
// addresses are the node's, from the attach reply (MAC 02:00:00:00:00:i,
// IPv4 10.0.0.i, IPv6 the MAC's link-local address: GID 0 as on rxe).
// The world's clock is the daemon's: it starts at the attach reply's
// time and moves only in stepFabric, the one place the process waits:
//
//  1. the program waits in a verb (a poll that finds nothing, a blocking
//     get_cq_event): the device's next deadline is the world's next event;
//  2. Port.Wait(deadline) sends the frames the device built since the
//     last wait and blocks, with the process lock released, until the
//     daemon wakes the process: input arrived or the deadline came;
//  3. the inputs (frames that reached the port, frames the port
//     finished) go to the device at their instants, the world's timers
//     firing in between, and the world runs to the daemon's now.
//
// Whenever its CM changes, the process leaves the daemon its will
// (renewWill): the MADs its CM IDs would send if destroyed, which the
// daemon sends if the process dies without detaching (killed by a
// signal, crashed).
//
// Another thread that posts or modifies while one waits calls
// Port.Interrupt (poke): the daemon wakes the waiter at once, so the
// frames the post built leave at the current instant.
//
// The fault plan, the capture, the trace and the ladder are the
// daemon's (`rocesim exec` hands --faults and --pcap to the fabric it
// starts); ROCESIM_DEVICES does not apply, and ROCESIM_FAULTS,
// ROCESIM_PCAP or ROCESIM_LADDER with ROCESIM_FABRIC is an error
// (readConfig).

import (
	"errors"
	"fmt"
	"net/netip"

	"github.com/rocesim/rocesim/procfabric"
	"github.com/rocesim/rocesim/sim"
	"github.com/rocesim/rocesim/verbs"
	"github.com/rocesim/rocesim/wire"
)

// fabricLink is the process's attachment to the daemon.
type fabricLink struct {
	port nodePort
	host *verbs.Host
	// where names the port in errors: the fabric and node, or the UDP
	// address (udp.go).
	where string
	// udp is the port when it is a UDP socket (udp.go), else nil.
	udp *udpPort
	// waiting: a thread is blocked in Port.Wait (with p.mu released);
	// the others wait on p.wake for what it brings. deadline is the
	// instant it waits for; polling says the wait is a poll's
	// (PollWait).
	waiting, polling bool
	deadline         sim.Time
	// will holds the changes renewWill sends.
	will []procfabric.WillEntry
	// rxSlack holds a wait's frame slack (kept for its capacity).
	rxSlack []wire.PacketRun
}

// joinFabric attaches to node cfg.Node of fabric cfg.Fabric and builds
// the world's one host on it.
func (p *process) joinFabric() error {
	if p.cfg.Devices > 1 {
		return fmt.Errorf("ROCESIM_DEVICES=%d: a process on a fabric (ROCESIM_FABRIC) has one device", p.cfg.Devices)
	}
	port, err := procfabric.AttachDir(p.cfg.FabricDir, p.cfg.Fabric, p.cfg.Node)
	if err != nil {
		return fmt.Errorf("ROCESIM_FABRIC=%s ROCESIM_NODE=%s: %w", p.cfg.Fabric, p.cfg.Node, err)
	}
	wc := verbs.WorldConfig{Seed: p.cfg.Seed, Profile: p.cfg.Profile, MaxEvents: p.cfg.MaxEvents, Annotate: true}
	p.w = verbs.NewWorld(wc)
	self := port.Self()
	var others []verbs.HostAddr
	for _, n := range port.Nodes() {
		if n.Name != self.Name {
			others = append(others, verbs.HostAddr{MAC: n.MAC, IPv4: n.IPv4, IPv6: n.IPv6})
		}
	}
	p.fab = &fabricLink{port: port, where: fmt.Sprintf("fabric %s, node %s", p.cfg.Fabric, p.cfg.Node)}
	p.fab.host = p.w.AddPortHost(self.Name, verbs.HostAddr{MAC: self.MAC, IPv4: self.IPv4, IPv6: self.IPv6},
		port.Index(), others, p.sendFrame)
	p.devs = []*device{{name: deviceName(p.cfg.DevicePrefix, 0), host: p.fab.host, keys: map[uint32]*memRegion{}, windows: map[uint32]*memRegion{}}}
	if err := p.w.RunTo(port.Now()); err != nil {
		port.Close()
		return err
	}
	if err := p.openAdmin(); err != nil {
		port.Close()
		return err
	}
	return nil
}

// sendFrame puts a frame of the device on the node's port (the host's
// output, verbs.World.AddPortHost).
func (p *process) sendFrame(frame, note []byte) {
	if err := p.fab.port.Send(frame, note); err != nil {
		// The daemon is gone or sent us away: the next wait says why.
		p.fab.host.TxDone(p.w.Now())
	}
}

// maxTxSlack bounds the tx-dones the daemon holds for a waiting process
// (and the device's walk over its frames in the port to count them).
const maxTxSlack = 4096

// stepFabric waits on the daemon until it wakes the process and applies
// what came; the caller holds p.mu, which is released while blocked. It
// always reports progress: on a fabric, input may come at any time.
// poll says the wait is a poll's (nodePort.PollWait).
func (p *process) stepFabric(poll bool) bool {
	f := p.fab
	if f.waiting {
		// Another thread waits on the daemon for everyone: this one
		// waits for that wait to end, and its caller looks again at
		// what the wait brought. A plain wait (the idle wait of
		// idle.go, a thread in ibv_get_cq_event) is not woken when
		// nothing is left to happen, where a poll must return 0: it
		// becomes a poll's (Port.Poll). It is not ended at once, as
		// Interrupt would: the other thread would wait again, this
		// poll end that wait again, and so on, at one instant, for
		// ever; a poll's second wait at an instant sleeps until
		// something happens, whoever's thread it is in.
		if poll && !f.polling {
			f.polling = true
			f.port.Poll()
		}
		p.await()
		return true
	}
	if p.cmHold() { // the program is answering a CM event (cm.go)
		p.nap(cmHoldNap)
		return true
	}
	deadline := sim.Never
	if s := p.w.Scheduler(); s.Pending() > 0 {
		deadline = s.NextAt()
	}
	f.waiting, f.deadline, f.polling = true, deadline, poll
	// The daemon need not wake the process for tx-dones the device
	// would only count: a sender's frames leave the port one every
	// serialization time, and most of them free nothing anyone waits
	// for (procfabric.Port.SetTxSlack).
	f.port.SetTxSlack(f.host.TxSlack(maxTxSlack))
	// Nor for the middle packets of a message its QPs are receiving:
	// they are placed and counted, nothing more.
	f.rxSlack = f.host.RxSlack(f.rxSlack[:0])
	f.port.SetRxSlack(f.rxSlack)
	p.mu.Unlock()
	wait := f.port.Wait
	if poll {
		wait = f.port.PollWait
	}
	in, err := wait(deadline)
	p.mu.Lock()
	f.waiting = false
	if err != nil && p.closed {
		// The program is exiting (shutdown closed the port under this
		// thread's Wait): nothing is wrong.
		p.wakeAll()
		return false
	}
	if err != nil {
		if errors.Is(err, procfabric.ErrDetached) {
			err = fmt.Errorf("fabric %s sent node %s away: %w", p.cfg.Fabric, p.cfg.Node, err)
		} else {
			err = fmt.Errorf("%s: %w", f.where, err)
		}
		p.fatal(err)
		p.wakeAll()
		return false
	}
	for _, e := range in.Events {
		if err := p.w.RunTo(e.At); err != nil {
			p.fatal(err)
		}
		if e.Frame != nil {
			f.host.Receive(e.At, 0, e.Frame)
		} else {
			f.host.TxDone(e.At)
		}
	}
	if err := p.w.RunTo(in.Now); err != nil {
		p.fatal(err)
	}
	p.settle()
	return true
}

// renewWill keeps the daemon the process's will: what the CM would send
// if each of its IDs were destroyed now (rdmacm.CM.FarewellChanges),
// one frame per ID under the ID's key. If the program is killed, the
// daemon sends it for the program, as the kernel destroys a dead
// process's IDs when it closes its rdma_cm file, so a connection's peer
// gets its DREQ and DISCONNECTED at once rather than waiting out its
// retries, or for ever if it was idle. settleCM calls it after every
// call and every run of the world; only the IDs that changed since are
// sent, each at once with the frames the process sent before it, so
// that a program killed right after an event (ESTABLISHED, its RTU just
// built) leaves the daemon that RTU and a will that matches it. A UDP
// port has no daemon to leave it with.
func (p *process) renewWill() {
	f := p.fab
	wp, ok := f.port.(interface {
		SetWill([]procfabric.WillEntry) error
	})
	c := cms[p]
	if !ok || c == nil {
		return
	}
	f.will = f.will[:0]
	c.cm.FarewellChanges(f.host, func(key uint64, dst netip.Addr, mad []byte) {
		e := procfabric.WillEntry{Key: uint32(key)}
		if mad != nil {
			if frame, note, err := f.host.MADFrame(nil, dst, mad); err == nil { // else Destroy could not send it either
				e.Frame, e.Note = frame, []byte(note)
			}
		}
		f.will = append(f.will, e)
	})
	if len(f.will) > 0 {
		// An error here is the port's: the next wait reports it.
		_ = wp.SetWill(f.will)
		clear(f.will)
	}
}

// poke tells the waiters something changed: another thread posted or
// modified. On a fabric, a thread blocked on the daemon is woken at the
// current instant, so that what the change built leaves now.
func (p *process) poke() {
	p.wakeAll()
	if p.fab != nil && p.fab.waiting {
		p.fab.port.Interrupt()
	}
}

// tick is poke for the library's own housekeeping (cmWaitSlice): the
// wait ends as for poke, but the fabric does not take it for the
// program's activity, so a program that only waits in rdma_get_cm_event
// still gets the fabric's report that nothing happens.
func (p *process) tick() {
	p.wakeAll()
	if p.fab != nil && p.fab.waiting {
		p.fab.port.Tick()
	}
}

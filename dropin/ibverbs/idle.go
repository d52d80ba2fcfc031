package main

import (
	"time"

	"golang.org/x/sys/unix"
)

// Waking the world for a program that sleeps outside the library.
//
// Virtual time moves when the program waits in a verb (model.go). A
// program may instead sleep in poll(2) or epoll_wait on a channel's fd,
// where the library never runs: nothing would ever make the fd readable.
// So a goroutine watches the program's verb calls, and when none has come
// for IdleWake of wall time while a CQ on a channel is armed or the CM
// waits on the network for an event and owes no answer (the program
// expects one), it runs the world, one instant at a time, until a
// channel or async fd becomes readable, the world has nothing left to
// do, or idleSteps instants have passed (then it looks again after the
// next quiet period).
//
// This is the one place the wall clock reaches the model, and it makes a
// run depend on it: a program that waits in verbs never lets it act, a
// program that sleeps in poll(2) gets the event as a real NIC would give
// it, but the virtual time of its later verbs depends on the scheduling.
// ROCESIM_IDLE_WAKE=off turns it off.
//
// It acts only while no thread of the program is inside the library: a
// thread that waits in a verb moves time itself, as threads.go lets it,
// and one at work in the library is about to act (the idle wait would
// take the process for waiting, and the clock could move past what it
// does: rping's server, its CM thread in rdma_get_cm_event and its CQ
// thread napping over a completion its main thread was about to act on).
// Nor while a thread of the program is runnable but has not had the CPU
// since the program's last call (threadWatch.idleBusy): on a loaded
// machine the quiet period is the scheduler's, not the program's (rping's
// client, descheduled between rdma_create_id and rdma_resolve_addr, had
// its REQ sent after a fault plan's link cut at 5 s).
//
// On a fabric (ROCESIM_FABRIC) the same quiet period, CQ armed or not,
// makes the process wait on the daemon until the program calls a verb
// again (idleOnFabric): a program blocked outside the verbs, as
// perftest's server in a TCP read while its client WRITEs, would
// otherwise hold the fabric's clock until the hold limit.

// idleSteps bounds the instants one wake runs.
const idleSteps = 1 << 12

// idleLoop runs until the process shuts down; sleep is time.Sleep.
func (p *process) idleLoop(grace time.Duration, sleep func(time.Duration)) {
	tick := max(grace/4, time.Millisecond)
	var seen uint64
	var quiet time.Duration
	for {
		sleep(tick)
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			return
		}
		if p.calls != seen {
			seen, quiet = p.calls, 0
			p.threads.idleQuiet()
		} else if quiet += tick; quiet >= grace && !p.threads.idleBusy(grace, int32(unix.Gettid())) {
			quiet = 0
			if p.fab != nil {
				p.idleOnFabric(seen)
			} else {
				p.wakeIdle()
			}
		}
		p.mu.Unlock()
	}
}

// wakeIdle runs the world for a program sleeping outside the library
// while it expects a completion event, or its CM waits on the network
// for one (cmWaiting: a program that poll(2)s its CM channel while its
// REQ crosses the fabric); the caller holds p.mu.
func (p *process) wakeIdle() {
	expecting := p.cmWaiting()
	for _, ch := range p.chs {
		expecting = expecting || (ch.armed && !ch.signalled)
	}
	if !expecting {
		return
	}
	before := p.readable()
	for range idleSteps {
		if p.threads.programInside() || !p.step() || p.readable() > before {
			return
		}
	}
}

// idleOnFabric waits on the fabric for a program that is busy outside
// the library (blocked in a TCP read, asleep, computing), until it makes
// a verb call; the caller holds p.mu. On a fabric the other processes
// cannot move time while this one runs, and its device must go on
// answering (ACKs, READ responses) as a NIC does whatever its program
// does: so the process waits on the daemon as if the program waited in
// a verb, and the frames that arrive meanwhile reach the device. A
// thread that then calls a verb finds the world moved on; one that posts
// wakes the waiter at once (poke).
//
// It stops waiting as soon as a descriptor becomes readable: the program
// is about to take that event (rping's CM thread polls its rdma_cm
// channel), and while this waits the fabric counts the process as
// waiting and may move the clock past what the program does next (its
// rdma_accept would come after the REQ's timeouts).
func (p *process) idleOnFabric(seen uint64) {
	before := p.readable()
	for !p.closed && p.calls == seen && !p.threads.programInside() {
		if !p.stepFabric(false) || p.readable() > before {
			return
		}
	}
}

// readable counts the descriptors that are readable now.
func (p *process) readable() int {
	n := 0
	for _, ch := range p.chs {
		if ch.signalled {
			n++
		}
	}
	for _, c := range p.ctxs {
		if c.signalled {
			n++
		}
	}
	return n + p.readableCM()
}

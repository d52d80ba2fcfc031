package main

import "time"

// Waking the world for a program that sleeps outside the library.
//
// Virtual time moves when the program waits in a verb (model.go). A
// program may instead sleep in poll(2) or epoll_wait on a channel's fd,
// where the library never runs: nothing would ever make the fd readable.
// So a goroutine watches the program's verb calls, and when none has come
// for IdleWake of wall time while a CQ on a channel is armed (the program
// expects an event), it runs the world, one instant at a time, until a
// channel or async fd becomes readable, the world has nothing left to
// do, or idleSteps instants have passed (then it looks again after the
// next quiet period).
//
// This is the one place the wall clock reaches the model, and it makes a
// run depend on it: a program that waits in verbs never lets it act, a
// program that sleeps in poll(2) gets the event as a real NIC would give
// it, but the virtual time of its later verbs depends on the scheduling.
// ROCESIM_IDLE_WAKE=off turns it off.

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
		} else if quiet += tick; quiet >= grace {
			quiet = 0
			p.wakeIdle()
		}
		p.mu.Unlock()
	}
}

// wakeIdle runs the world for a program sleeping outside the library
// while it expects a completion event; the caller holds p.mu.
func (p *process) wakeIdle() {
	expecting := false
	for _, ch := range p.chs {
		expecting = expecting || (ch.armed && !ch.signalled)
	}
	if !expecting {
		return
	}
	before := p.readable()
	for range idleSteps {
		if !p.step() || p.readable() > before {
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
	return n
}

// Package nic will hold the RDMA NIC model as a pure state machine: every
// input is a call that takes the current virtual time (post a work
// request, receive a frame, advance time), and every output is a batch of
// frames to send, completions, async events and the next deadline. It
// never reads a clock, starts a goroutine or touches a socket, so the same
// device runs on the simulated fabric and against real frames.
//
// The device arrives with issues 4 and 5; the wire format it speaks is
// package wire.
package nic

package nic_test

import (
	"fmt"
	"strings"
	"testing"
)

// Memory that goes away in the middle of a message: a region
// deregistered between the packets of a WRITE, a READ's responses, a
// requester's own packets, or before an atomic's result lands. The
// interaction scripts' commands cannot deregister a region, so these
// drive the same two-device pair from Go: each step is a script command
// with its expected output, or an action on the devices between two.

// step is one command of the pair and the output it must produce (or,
// with has, a line it must contain), or an action (do) run instead of a
// command.
type step struct {
	cmd  string
	do   func(t *testing.T, h *pair)
	want string
	has  string
}

// runSteps runs the steps on a fresh pair made with the new line's
// arguments, comparing each command's output.
func runSteps(t *testing.T, newArgs string, steps []step) {
	t.Helper()
	h := newPair(t, parseArgs(strings.Fields(newArgs)))
	for i, s := range steps {
		if s.do != nil {
			s.do(t, h)
			continue
		}
		got := h.run(t, s.cmd)
		if got == "" {
			got = "(nothing)"
		}
		switch {
		case s.has != "" && !strings.Contains(got, s.has):
			t.Errorf("step %d: %s\ngot:\n%s\nwant a line with %q", i, s.cmd, got, s.has)
		case s.has == "" && got != s.want:
			t.Errorf("step %d: %s\ngot:\n%s\nwant:\n%s", i, s.cmd, got, s.want)
		}
	}
}

// dereg deregisters the MR of side name.
func dereg(name string) func(t *testing.T, h *pair) {
	return func(t *testing.T, h *pair) {
		t.Helper()
		s := h.side(t, name)
		if err := s.dev.DeregMR(s.mr); err != nil {
			t.Fatalf("dereg_mr %s: %v", name, err)
		}
	}
}

// A message whose target at b goes away after its first two packets:
// its LAST is lost, b's region is deregistered, and the ACK timeout
// resends the message. The FIRST and MIDDLE are duplicates (each
// re-acknowledged, nothing written); the LAST finds the memory gone.
//
//   - A WRITE: the LAST fails the R_Key check that rxe's check_rkey runs
//     for every packet of a WRITE (lookup_mr no longer finds the region):
//     NAK remote access error, REM_ACCESS_ERR, both QPs to ERR (rxe 6.1
//     raises no event on the responder, see remoteError).
//   - A SEND into a receive buffer, under the spec profile: the receive
//     completes with LOC_PROT_ERR (its buffer no longer accessible), the
//     responder raises QP_FATAL and NAKs remote operational error, which
//     the requester completes with REM_OP_ERR.
func TestTargetDeregisteredMidMessage(t *testing.T) {
	for _, c := range []struct {
		name, args, op, at, nak, a, b string
	}{
		{name: "write", args: "type=rc", op: "RDMA_WRITE", at: "t=64ms",
			nak: "NAK(remote access error)", a: "IBV_WC_RDMA_WRITE remote access error",
			b: "wc id=100 IBV_WC_RECV Work Request Flushed Error\nstate ERR"}, // the unused receive flushed
		{name: "send-spec", args: "type=rc profile=spec", op: "SEND", at: "t=67.108864ms",
			nak: "NAK(remote operational error)", a: "IBV_WC_SEND remote operation error",
			b: "wc id=100 IBV_WC_RECV local protection error\nevent QP_FATAL\nstate ERR"},
	} {
		t.Run(c.name, func(t *testing.T) {
			post, dmalen, acks := "post a write len=3000 id=1", " dmalen=3000", `
4 b->a RC_ACKNOWLEDGE psn=1 ACK msn=0
5 b->a RC_ACKNOWLEDGE psn=1 ACK msn=0
6 b->a RC_ACKNOWLEDGE psn=2 `
			if c.op == "SEND" {
				// Under the spec profile a duplicate without AckReq gets
				// no answer.
				post, dmalen, acks = "post a send len=3000 id=1", "", "\n4 b->a RC_ACKNOWLEDGE psn=2 "
			}
			sent := fmt.Sprintf(`1 a->b RC_%[1]s_FIRST psn=0%[2]s len=1024
2 a->b RC_%[1]s_MIDDLE psn=1 len=1024
3 a->b RC_%[1]s_LAST psn=2 ack len=952`, c.op, dmalen)
			runSteps(t, c.args, []step{
				{cmd: "recv b len=4096", want: "ok"},
				{cmd: post, want: "ok"},
				{cmd: "deliver drop=3", want: sent + " (dropped)"},
				{do: dereg("b")},
				{cmd: "advance", want: c.at},
				{cmd: "deliver", want: sent + acks + c.nak + " msn=0"},
				{cmd: "poll a", want: "wc id=1 " + c.a + "\nstate ERR"},
				{cmd: "poll b", want: c.b},
			})
		})
	}
}

// The region a message's bytes are read from goes while the port holds
// the first 64 frames (the per-QP limit of frames in flight, inflightHigh;
// deliver hold keeps them there); once the port drains, the next packet
// finds it gone.
//
//   - A READ's source at the responder b: rxe's read_reply rechecks the
//     R_Key's region for every packet after the first (rxe_recheck_mr):
//     NAK remote access error, the READ completes with REM_ACCESS_ERR,
//     both QPs to ERR. (The NAK's PSN is not asserted: the model sends the
//     failed response's, where rxe's acknowledge would send the
//     request's, pkt->psn.)
//   - A WRITE's source at the requester a: its packets cannot be read
//     (rxe's requester: copy_data fails, wqe->status = LOC_PROT_ERR and
//     the requester to ERR), so nothing more goes out, the WRITE
//     completes with LOC_PROT_ERR, and b is left as it was.
func TestSourceDeregisteredAtPortLimit(t *testing.T) {
	for _, c := range []struct {
		name, post, held, owner, next, a, b string
	}{
		{name: "read", post: "post a read len=20000 id=1", held: "65 b->a RC_RDMA_READ_RESPONSE_MIDDLE psn=63 len=256",
			owner: "b", next: "1 b->a RC_ACKNOWLEDGE psn=", a: "IBV_WC_RDMA_READ remote access error", b: "state ERR"},
		{name: "write", post: "post a write len=20000 id=1", held: "64 a->b RC_RDMA_WRITE_MIDDLE psn=63 len=256",
			owner: "a", next: "", a: "IBV_WC_RDMA_WRITE local protection error", b: "state RTS"},
	} {
		t.Run(c.name, func(t *testing.T) {
			next := step{cmd: "deliver", has: c.next}
			if c.next == "" {
				next.want = "(nothing)"
			}
			runSteps(t, "type=rc mtu=256", []step{
				{cmd: c.post, want: "ok"},
				{cmd: "deliver hold", has: c.held},
				{cmd: "deliver", want: "(nothing)"}, // nothing more until the port drains
				{do: dereg(c.owner)},
				{cmd: "txdone " + c.owner, want: "0 frames still at the port"},
				next,
				{cmd: "poll a", want: "wc id=1 " + c.a + "\nstate ERR"},
				{cmd: "poll b", want: c.b},
			})
		})
	}
}

// An atomic whose result buffer is deregistered before its ACK comes
// back: the responder has done the atomic, but the original value cannot
// be written (rxe's completer do_atomic: copy_data fails, LOC_PROT_ERR),
// so the FETCH_ADD completes with LOC_PROT_ERR and the requester's QP
// goes to ERR.
func TestAtomicResultDeregistered(t *testing.T) {
	runSteps(t, "type=rc", []step{
		{cmd: "post a faa id=1", want: "ok"},
		{do: dereg("a")},
		{cmd: "deliver", want: `1 a->b RC_FETCH_ADD psn=0 ack
2 b->a RC_ATOMIC_ACKNOWLEDGE psn=0 ACK msn=1 orig=0x332c251e17100902`},
		{cmd: "poll a", want: "wc id=1 IBV_WC_FETCH_ADD local protection error\nstate ERR"},
		{cmd: "poll b", want: "state RTS"},
	})
}

package conformance

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// The question of issue 16: a CQ on a completion channel, armed, gets a
// completion, so an event is queued on the channel. Does ibv_destroy_cq
// succeed when the program never read the event, and when it read it
// (ibv_get_cq_event) but did not acknowledge it (ibv_ack_cq_events)?
//
// The kernel counts an event as reported when it is read from the
// channel (ib_uverbs_event_read increments the object's
// comp_events_reported), and destroying the CQ drops its unread events
// (ib_uverbs_release_ucq); rdma-core's ibv_cmd_destroy_cq then waits
// until the events acknowledged equal the events reported. So: unread,
// destroy succeeds at once; read and not acknowledged, destroy blocks
// until another thread acknowledges. destroyCQWithEvents asks the agent
// exactly that, on rxe (TestDestroyCQWithEventsRXE) and on the drop-in
// library (TestDestroyCQWithEventsCABI), and checks both answer so.

// destroyCQWithEvents runs the sequence on the agent a of one device
// (open's arguments in open), over a QP connected to itself through GID
// index gid at address ip: two CQs on the channel, both armed, one
// completion on each, one event read and not acknowledged, then both
// CQs destroyed.
func destroyCQWithEvents(t *testing.T, ctx context.Context, a *Agent, open, gid, ip string) {
	t.Helper()
	evs, err := a.Script(ctx, open, "pd", "channel", "cq name=s depth=16 channel=1", "cq name=r depth=16 channel=1",
		"mr name=m len=4096 fill=seq", "qp type=rc send=4 recv=4 sge=1 inline=0 psn=100 send_cq=s recv_cq=r")
	if err != nil {
		t.Fatal(err)
	}
	qp := lastEvent(evs, "qp")
	if qp == nil {
		t.Fatal("no qp event")
	}
	evs, err = a.Script(ctx, fmt.Sprintf("connect gid=%s qpn=%d psn=100 dgid=%s", gid, qp.QPN, ip),
		"notify cq=s", "notify cq=r", "post_recv wr_id=1 mr=m off=2048 len=1024", "post_send wr_id=2 op=send mr=m off=0 len=64",
		"poll cq=s n=1 timeout_ms=10000", "poll cq=r n=1 timeout_ms=10000", "get_event timeout_ms=10000", "destroy_qp")
	if err != nil {
		t.Fatal(err)
	}
	read := lastEvent(evs, "cq_event")
	if read == nil {
		t.Fatal("no cq_event")
	}
	unread := map[string]string{"s": "r", "r": "s"}[read.Name]
	// The unread one is given ten seconds (it returns at once unless it
	// blocks; a guest on a busy host may be slow), the read one one
	// second (it blocks until the agent acknowledges).
	evs, err = a.Script(ctx, "destroy_cq cq="+unread+" wait_ms=10000", "destroy_cq cq="+read.Name+" wait_ms=1000")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, ev := range evs {
		if ev.Event == "destroy_cq" {
			got = append(got, fmt.Sprintf("%s ret=%d blocked=%d", ev.Name, ev.Ret, ev.Blocked))
		}
	}
	// The unread one: at once. The read one: blocked (an event read, not
	// acknowledged), then, acknowledged by the agent, destroyed.
	want := []string{unread + " ret=0 blocked=0", read.Name + " ret=0 blocked=1", read.Name + " ret=0 blocked=1"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("destroy_cq answers %q, want %q", got, want)
	}
	t.Logf("destroy_cq answers: %q", got)
}

// TestDestroyCQWithEventsRXE asks real rxe (see destroyCQWithEvents).
func TestDestroyCQWithEventsRXE(t *testing.T) {
	vm, a, ctx := soloAgent(t, "destroycq")
	m := readyGID.FindStringSubmatch(vm.Console())
	if m == nil {
		t.Fatalf("no RoCE v2 GID index on the console:\n%s", vm.Console())
	}
	destroyCQWithEvents(t, ctx, a, "open", m[1], "10.0.0.1")
	if t.Failed() {
		t.Logf("console:\n%s", vm.Console())
	}
}

// TestDestroyCQWithEventsCABI asks the drop-in library, the agent in one
// process with one device (see destroyCQWithEvents).
func TestDestroyCQWithEventsCABI(t *testing.T) {
	c := needCABI(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	la, err := startLocalAgent(ctx, "solo", c.Agent, []string{"LD_LIBRARY_PATH=" + c.Lib})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		la.Stop()
		if t.Failed() {
			t.Logf("stderr:\n%s", la.Stderr())
		}
	}()
	a, err := startAgent(ctx, la)
	if err != nil {
		t.Fatal(err)
	}
	destroyCQWithEvents(t, ctx, a, "open dev=rocesim0", cabiGID, "10.0.0.1")
}

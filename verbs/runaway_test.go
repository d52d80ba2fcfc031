package verbs_test

import (
	"errors"
	"net/netip"
	"regexp"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocesim/rocesim/faults"
	"github.com/rocesim/rocesim/sim"
	"github.com/rocesim/rocesim/sim/fabric"
	"github.com/rocesim/rocesim/verbs"
	"github.com/rocesim/rocesim/wire"
)

// TestRunawayRetransmitDiagnosis: every frame from a is lost and a's
// retry_cnt is 7, which rxe's profile retries forever. The run spends its
// event budget and says which QP keeps it going: it resends PSN 100 every
// ACK timeout (timeout 14: 16 jiffies, 64 ms), because of retry_cnt 7.
func TestRunawayRetransmitDiagnosis(t *testing.T) {
	w, a, _ := pair(t, verbs.WorldConfig{Seed: 1, Plan: planOf(t, "drop src=a\n"), MaxEvents: 2000})
	_, err := a.qp.PostSend([]verbs.SendWR{sendWR(1, a, 4096)}) // PSNs 100-103
	require.NoError(t, err)
	err = w.Run()
	var ra *verbs.RunawayError
	require.True(t, errors.As(err, &ra), "want a *verbs.RunawayError, got %v", err)
	assert.True(t, errors.Is(err, sim.ErrEventLimit))
	assert.Equal(t, uint64(2000), ra.Events)
	require.NotEmpty(t, ra.Stalls)
	s := ra.Stalls[0]
	assert.Equal(t, "a", s.Host)
	assert.Equal(t, a.qp.QPNum, s.QPN)
	assert.Equal(t, "b", s.Peer)
	assert.Equal(t, wire.PSN(100), s.PSN)
	assert.Equal(t, 64*sim.Millisecond, s.Interval)
	assert.Greater(t, s.Retransmits, uint64(100))
	assert.Contains(t, err.Error(), "retransmitted PSN 100 ")
	assert.Contains(t, err.Error(), "every 64ms: retry_cnt 7 retries forever under the rxe profile; set a deadline or a finite retry_cnt")
	assert.Contains(t, err.Error(), "the fault plan dropped")
}

// TestRunawayRNRDiagnosis: b never posts a receive, a's rnr_retry is 7
// (infinite under both profiles): the diagnosis counts b's RNR NAKs and
// names rnr_retry.
func TestRunawayRNRDiagnosis(t *testing.T) {
	for _, prof := range []verbs.Profile{verbs.ProfileRXE, verbs.ProfileSpec} {
		t.Run(prof.String(), func(t *testing.T) {
			w, a, _ := pair(t, verbs.WorldConfig{Seed: 1, Profile: prof, MaxEvents: 5000,
				QPName: func(host string, qpn uint32) string { return host + ".client" }})
			_, err := a.qp.PostSend([]verbs.SendWR{sendWR(1, a, 8)})
			require.NoError(t, err)
			err = w.Run()
			var ra *verbs.RunawayError
			require.True(t, errors.As(err, &ra), "want a *verbs.RunawayError, got %v", err)
			require.NotEmpty(t, ra.Stalls)
			s := ra.Stalls[0]
			assert.Equal(t, a.qp.QPNum, s.QPN)
			assert.Greater(t, s.RNRNAKs, uint64(100))
			assert.Contains(t, ra.Why(), "a.client was refused with ")
			assert.Contains(t, ra.Why(), "RNR NAKs by b")
			assert.Contains(t, ra.Why(), "rnr_retry 7 retries forever and b never has a receive posted for it")
		})
	}
}

// TestSettledRunHasNoStalls: a run that ends by itself has nothing to
// diagnose, the budget is not touched, and the watch keeps nothing of
// a flow that never resent.
func TestSettledRunHasNoStalls(t *testing.T) {
	w, a, b := pair(t, verbs.WorldConfig{Seed: 1, MaxEvents: 2000})
	_, err := b.qp.PostRecv([]verbs.RecvWR{recvWR(1, b)})
	require.NoError(t, err)
	_, err = a.qp.PostSend([]verbs.SendWR{sendWR(2, a, 4096)})
	require.NoError(t, err)
	require.NoError(t, w.Run())
	assert.Empty(t, w.Stalls())
	flows, records := w.WatchRecords()
	assert.Zero(t, flows, "a flow that never resent is not even known")
	assert.Zero(t, records, "a flow that never resent keeps no record of its rounds")
}

// TestStallRecordMadeAtFirstResend: the one flow of two that resends is
// known, with a record of its rounds, and the diagnosis names it; the
// other is not known at all.
func TestStallRecordMadeAtFirstResend(t *testing.T) {
	w, a, b := pair(t, verbs.WorldConfig{Seed: 1, MaxEvents: 100000,
		Plan: planOf(t, "drop src=a psn=101 tx=1\ndrop src=a psn=101 tx=2\ndrop src=a psn=101 tx=3\n")})
	_, err := b.qp.PostRecv([]verbs.RecvWR{recvWR(1, b)})
	require.NoError(t, err)
	_, err = a.qp.PostRecv([]verbs.RecvWR{recvWR(1, a)})
	require.NoError(t, err)
	_, err = a.qp.PostSend([]verbs.SendWR{sendWR(2, a, 4096)}) // PSNs 100-103
	require.NoError(t, err)
	_, err = b.qp.PostSend([]verbs.SendWR{sendWR(3, b, 64)})
	require.NoError(t, err)
	require.NoError(t, w.Run())
	flows, records := w.WatchRecords()
	assert.Equal(t, [2]int{1, 1}, [2]int{flows, records}, "a->b alone, which resent; b->a never did")
	st := w.Stalls()
	require.Len(t, st, 1)
	assert.Equal(t, "a", st[0].Host)
	assert.Equal(t, wire.PSN(101), st[0].PSN)
	assert.Equal(t, uint64(3), st[0].Retransmits, "%+v", st[0])
}

// TestStallsInConnectionOrder: two flows that stall alike are named in
// the order their QPs were connected (at one instant, by host), though
// the later one resent first (its records are made in the order of the
// first resends).
func TestStallsInConnectionOrder(t *testing.T) {
	// a's one-packet SEND goes first and is resent at each ACK timeout;
	// b's 4-packet SEND loses its second packet, which the NAK of the
	// gap has resent at once.
	w, a, b := pair(t, verbs.WorldConfig{Seed: 1, MaxEvents: 100000,
		Plan: planOf(t, "drop src=a psn=100 tx=1\ndrop src=a psn=100 tx=2\ndrop src=a psn=100 tx=3\n"+
			"drop src=b psn=201 tx=1\ndrop src=b psn=201 tx=2\ndrop src=b psn=201 tx=3\n")})
	_, err := b.qp.PostRecv([]verbs.RecvWR{recvWR(1, b)})
	require.NoError(t, err)
	_, err = a.qp.PostRecv([]verbs.RecvWR{recvWR(1, a)})
	require.NoError(t, err)
	_, err = a.qp.PostSend([]verbs.SendWR{sendWR(2, a, 64)}) // PSN 100
	require.NoError(t, err)
	_, err = b.qp.PostSend([]verbs.SendWR{sendWR(3, b, 4096)}) // PSNs 200-203
	require.NoError(t, err)
	require.NoError(t, w.Run())
	assert.Contains(t, w.WatchState(), "reqs [{from:1 to:0 ", "b's flow resent first, so its record came first")
	st := w.Stalls()
	require.Len(t, st, 2, "%+v", st)
	assert.Equal(t, [2]string{"a", "b"}, [2]string{st[0].Host, st[1].Host}, "%+v", st)
	assert.Equal(t, st[0].Retransmits, st[1].Retransmits, "%+v", st)
}

// TestProgressEvery65536Events: WorldConfig.Progress is told the virtual
// time, events and frames every 65536 events of a run, deterministically
// (the driver, not the world, decides whether to print).
func TestProgressEvery65536Events(t *testing.T) {
	var got []verbs.Progress
	w, a, _ := pair(t, verbs.WorldConfig{Seed: 1, Plan: planOf(t, "drop src=a\n"), MaxEvents: 140_000,
		Progress: func(p verbs.Progress) { got = append(got, p) }})
	_, err := a.qp.PostSend([]verbs.SendWR{sendWR(1, a, 4096)})
	require.NoError(t, err)
	require.Error(t, w.Run())
	require.Len(t, got, 2)
	for i, p := range got {
		assert.Equal(t, uint64(65536*(i+1)), p.Events)
		assert.Greater(t, p.Frames, uint64(65536*(i+1)), "four frames a round, one event")
		if i > 0 {
			assert.Greater(t, p.Now, got[i-1].Now)
		}
	}
}

// TestRunawayTwoStallsToSameQPN: two QPs resend their own PSN every ACK
// timeout (every frame from a and b is lost), toward destination QPs of
// one number; the diagnosis names both, each with its PSN and peer. In
// "one sender, two peers", a has a QP toward QP X on b and one toward QP
// X on c (b and c number their QPs alike): keyed by sender and
// destination QPN alone, as the watch once was, the two QPs' requests
// were one flow whose PSNs alternated, no PSN repeated round after round
// and no stall was found. In "two senders, one peer", a's and b's QPs
// both send to c's QP X: two flows of one destination QP.
func TestRunawayTwoStallsToSameQPN(t *testing.T) {
	for _, tc := range []struct {
		name    string
		senders [2]string // the hosts of the two stalled QPs
		peers   [2]string // the hosts of their destination QPs
	}{
		{"one sender, two peers", [2]string{"a", "a"}, [2]string{"b", "c"}},
		{"two senders, one peer", [2]string{"a", "b"}, [2]string{"c", "c"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := verbs.NewWorld(verbs.WorldConfig{Seed: 1, Plan: planOf(t, "drop src=a\ndrop src=b\n"), MaxEvents: 4000})
			hosts := map[string]*verbs.Host{}
			for _, n := range []string{"a", "b", "c"} {
				hosts[n] = w.AddHost(n)
			}
			require.NoError(t, w.ConnectSwitch())
			// Each peer host's first QP is the destination: every host
			// numbers its first QP alike, so both have number X.
			dest := map[string]*endpoint{}
			for _, n := range tc.peers {
				if dest[n] == nil {
					dest[n] = setup(hosts[n], 300)
				}
			}
			src := [2]*endpoint{setup(hosts[tc.senders[0]], 100), setup(hosts[tc.senders[1]], 500)}
			require.Equal(t, dest[tc.peers[0]].qp.QPNum, dest[tc.peers[1]].qp.QPNum, "the destination QPs must have one number")
			for i, e := range src {
				require.NoError(t, e.connect(dest[tc.peers[i]]))
				if i == 0 || tc.peers[1] != tc.peers[0] {
					require.NoError(t, dest[tc.peers[i]].connect(e))
				}
				_, err := e.qp.PostSend([]verbs.SendWR{sendWR(uint64(i), e, 8)})
				require.NoError(t, err)
			}
			var ra *verbs.RunawayError
			require.ErrorAs(t, w.Run(), &ra)
			require.Len(t, ra.Stalls, 2, ra.Why())
			for i, e := range src {
				var s *verbs.Stall
				for j := range ra.Stalls {
					if ra.Stalls[j].Host == tc.senders[i] && ra.Stalls[j].QPN == e.qp.QPNum {
						s = &ra.Stalls[j]
					}
				}
				require.NotNil(t, s, "no stall for %s QP 0x%x: %s", tc.senders[i], e.qp.QPNum, ra.Why())
				assert.Equal(t, tc.peers[i], s.Peer)
				assert.Equal(t, dest[tc.peers[i]].qp.QPNum, s.PeerQPN)
				assert.Equal(t, e.qp.QPNum, s.QPN)
				assert.Equal(t, wire.PSN(100+400*i), s.PSN)
				assert.Equal(t, 64*sim.Millisecond, s.Interval)
				assert.Greater(t, s.Retransmits, uint64(10))
			}
		})
	}
}

// TestStallWatchHearsTheNICs: the stall watch hears from the NICs what
// they resend, so that a fault plan, empty, set while the run goes on or
// rewriting the PSNs on the wire, and egress queues that drop frames on
// entry, change neither what it records nor what it says. The workload has every kind of flow the
// watch keeps: a QP refused with RNR NAKs (b never posts a receive), one
// that retransmits forever (c's QP is in ERROR and acknowledges
// nothing), and one that completes (c to b), over three hosts and a
// switch.
func TestStallWatchHearsTheNICs(t *testing.T) {
	run := func(t *testing.T, cfg verbs.WorldConfig, setPlan bool) (*verbs.World, error) {
		t.Helper()
		w := verbs.NewWorld(cfg)
		ha, hb, hc := w.AddHost("a"), w.AddHost("b"), w.AddHost("c")
		require.NoError(t, w.ConnectSwitch())
		a1, a2, b1, b2, c1, c2 := setup(ha, 100), setup(ha, 500), setup(hb, 200), setup(hb, 600), setup(hc, 300), setup(hc, 700)
		for _, p := range [][2]*endpoint{{a1, b1}, {b1, a1}, {a2, c1}, {c1, a2}, {c2, b2}, {b2, c2}} {
			require.NoError(t, p[0].connect(p[1]))
		}
		require.NoError(t, c1.qp.Modify(&verbs.QPAttr{QPState: verbs.QPStateErr}, verbs.QPAttrState))
		for i := range uint64(4) {
			_, err := b2.qp.PostRecv([]verbs.RecvWR{{WRID: i, SGList: []verbs.SGE{b2.mr.SGE(i*1024, 1024)}}})
			require.NoError(t, err)
			_, err = c2.qp.PostSend([]verbs.SendWR{sendWR(i, c2, 1000)})
			require.NoError(t, err)
		}
		_, err := a1.qp.PostSend([]verbs.SendWR{sendWR(1, a1, 8)})
		require.NoError(t, err)
		_, err = a2.qp.PostSend([]verbs.SendWR{sendWR(2, a2, 3000)})
		require.NoError(t, err)
		if setPlan {
			require.NoError(t, w.RunFor(100*sim.Microsecond))
			require.NoError(t, w.SetPlan(&faults.Plan{}))
		}
		return w, w.Run()
	}
	base := verbs.WorldConfig{Seed: 1, MaxEvents: 20000}
	sent, errSent := run(t, base, false)
	var ra *verbs.RunawayError
	require.ErrorAs(t, errSent, &ra)
	require.Len(t, ra.Stalls, 2, ra.Why())

	withPlan := base
	withPlan.Plan = &faults.Plan{}
	recorded, errRecorded := run(t, withPlan, false)
	assert.Equal(t, errRecorded.Error(), errSent.Error())
	assert.Equal(t, recorded.WatchState(), sent.WatchState())

	switched, errSwitched := run(t, base, true)
	assert.Equal(t, errSwitched.Error(), errSent.Error())
	assert.Equal(t, switched.WatchState(), sent.WatchState())

	// A plan that rewrites the PSNs of every frame a2 sends to c1 (which,
	// in ERROR, drops them either way): on the wire the retransmitted
	// PSN is 100 higher, but a2's NIC resends its own PSN, and the watch
	// says so (read from the records, it named PSN 600, not 500).
	rewritten := base
	rewritten.Plan = planOf(t, "rewrite set-psn=+100 src=a dst=c\n")
	moved, errMoved := run(t, rewritten, false)
	var rm *verbs.RunawayError
	require.ErrorAs(t, errMoved, &rm)
	assert.Contains(t, rm.Why(), "rewrote", "the plan acted")
	assert.Equal(t, ra.Stalls, rm.Stalls)
	assert.Equal(t, moved.WatchState(), sent.WatchState())

	// Egress queues of two frames: a full one drops the frame on entry,
	// ahead of those it holds; the NIC resent it all the same.
	small := base
	small.Link = fabric.DefaultLinkConfig()
	small.Link.QueueBytes = 2200
	smallPlan := small
	smallPlan.Plan = &faults.Plan{}
	dropped, errDropped := run(t, small, false)
	droppedRecorded, errDroppedRecorded := run(t, smallPlan, false)
	var drops uint64
	for _, l := range dropped.Fabric().Links() {
		drops += l.Stats(0).QueueDrops + l.Stats(1).QueueDrops
	}
	require.NotZero(t, drops, "the test needs a queue drop")
	assert.Equal(t, errDroppedRecorded.Error(), errDropped.Error())
	assert.Equal(t, droppedRecorded.WatchState(), dropped.WatchState())
}

// TestStallWatchNamesHostsByNode: the stall watch finds a frame's
// sender and destination by their fabric node (Node.Index, Addressee),
// which is not the host's index when a node was added to the fabric
// outside the world: the diagnosis must still name a's QP and b.
// A test's own Observe still sees every hop (a switch makes two per
// frame), while the watch takes first hops alone.
func TestStallWatchNamesHostsByNode(t *testing.T) {
	first, later := 0, 0
	w := verbs.NewWorld(verbs.WorldConfig{Seed: 1, MaxEvents: 5000, Observe: func(r *fabric.FrameRecord) {
		if r.First {
			first++
		} else {
			later++
		}
	}})
	w.Fabric().AddNode("stray", fabric.PortConfig{MAC: wire.MAC{0x02, 0, 0, 0, 0xff, 0xfe}})
	ha, hb := w.AddHost("a"), w.AddHost("b")
	require.NoError(t, w.ConnectSwitch())
	a, b := setup(ha, 100), setup(hb, 200)
	require.NoError(t, a.connect(b))
	require.NoError(t, b.connect(a))
	_, err := a.qp.PostSend([]verbs.SendWR{sendWR(1, a, 8)})
	require.NoError(t, err)
	var ra *verbs.RunawayError
	require.ErrorAs(t, w.Run(), &ra)
	require.NotEmpty(t, ra.Stalls)
	s := ra.Stalls[0]
	assert.Equal(t, "a", s.Host)
	assert.Equal(t, a.qp.QPNum, s.QPN)
	assert.Equal(t, "b", s.Peer)
	assert.Greater(t, s.RNRNAKs, uint64(100))
	assert.NotZero(t, first)
	assert.InDelta(t, first, later, 1, "every frame crosses the switch: two hops (one may be on its way when the budget ends)")
}

// TestStallWatchReconnected: a QP reset and connected again to the same
// QP numbers its go-back-N rounds from 1 again; the watch starts a new
// run of rounds for the new connection rather than taking its first
// round for the old one's going on. a's SEND at PSN 100 loses its first
// transmission on each connection (tx=1 and tx=3 of that PSN).
func TestStallWatchReconnected(t *testing.T) {
	w, a, b := pair(t, verbs.WorldConfig{Seed: 1, MaxEvents: 100000, Plan: planOf(t, "drop src=a psn=100 tx=1\ndrop src=a psn=100 tx=3\n")})
	post := func() {
		_, err := b.qp.PostRecv([]verbs.RecvWR{recvWR(1, b)})
		require.NoError(t, err)
		_, err = a.qp.PostSend([]verbs.SendWR{sendWR(2, a, 64)}) // PSN 100
		require.NoError(t, err)
		require.NoError(t, w.Run())
		require.Len(t, pollAll(a.cq), 1)
		pollAll(b.cq)
	}
	post()
	first := regexp.MustCompile(`first:(\d+) `)
	m := first.FindStringSubmatch(w.WatchState())
	require.NotNil(t, m, w.WatchState())
	firstRound, _ := strconv.ParseInt(m[1], 10, 64)
	reconnected := int64(w.Now())
	for _, e := range []*endpoint{a, b} {
		require.NoError(t, e.qp.Modify(&verbs.QPAttr{QPState: verbs.QPStateReset}, verbs.QPAttrState))
	}
	require.NoError(t, a.connect(b))
	require.NoError(t, b.connect(a))
	post()
	m = first.FindStringSubmatch(w.WatchState())
	require.NotNil(t, m, w.WatchState())
	at, _ := strconv.ParseInt(m[1], 10, 64)
	assert.Greater(t, at, reconnected, "the run of rounds is the new connection's (the old one's began at %d): %s", firstRound, w.WatchState())
	assert.Contains(t, w.WatchState(), " rounds:1 ", "one round on the new connection")
}

// TestStallWatchReadsOtherNodes: frames a node outside the world's hosts
// sends (added to the fabric directly) are read from their records, by
// their PSNs: requests that go back to an earlier PSN, twice, are two
// go-back-N rounds at that PSN.
func TestStallWatchReadsOtherNodes(t *testing.T) {
	w := verbs.NewWorld(verbs.WorldConfig{Seed: 1})
	hb := w.AddHost("b")
	b := setup(hb, 200)
	stray := w.Fabric().AddNode("stray", fabric.PortConfig{MAC: wire.MAC{0x02, 0, 0, 0, 0xff, 0xfe}, IPv4: netip.MustParseAddr("10.0.0.99")})
	var bNode *fabric.Node
	for _, n := range w.Fabric().Nodes() {
		if n.Name() == "b" {
			bNode = n
		}
	}
	require.NotNil(t, bNode)
	_, err := w.Fabric().Connect("stray-b", stray.Port(0), bNode.Port(0), fabric.DefaultLinkConfig())
	require.NoError(t, err)
	addr := verbs.HostAddrOf(1)
	for _, psn := range []uint32{5, 6, 5, 6, 5} {
		f := wire.Frame{SrcMAC: wire.MAC{0x02, 0, 0, 0, 0xff, 0xfe}, DstMAC: addr.MAC, Src: netip.MustParseAddr("10.0.0.99"), Dst: addr.IPv4,
			TTL: 64, SrcPort: wire.UDPSourcePort(1, b.qp.QPNum),
			BTH: wire.BTHFields{Opcode: wire.OpRCSendOnly, PKey: 0xFFFF, DestQP: b.qp.QPNum, PSN: wire.PSN(psn)}, Payload: make([]byte, 8)}
		buf := make([]byte, 256)
		n, err := wire.Encode(buf, &f)
		require.NoError(t, err)
		require.NoError(t, stray.Send(0, buf[:n], nil))
	}
	require.NoError(t, w.Run())
	flows, records := w.WatchRecords()
	assert.Equal(t, [2]int{1, 1}, [2]int{flows, records}, "the stray's flow to b, which went back")
	assert.Contains(t, w.WatchState(), " round:5 rounds:2 ", "two rounds at PSN 5")
}

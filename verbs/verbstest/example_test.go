package verbstest_test

import (
	"fmt"
	"strings"

	"github.com/rocesim/rocesim/sim"
	"github.com/rocesim/rocesim/verbs"
	"github.com/rocesim/rocesim/verbs/verbstest"
)

// In a test, t is the test's *testing.T. A runnable example has none, so
// these use a Recorder, which plays the part outside go test.

// A lost packet in the middle of an RDMA WRITE: the responder NAKs the
// gap, the requester goes back to the lost PSN, and the WRITE completes
// with the data intact. The QPs start at PSN 0 (FixedPSN), so the PSNs
// read plainly.
func Example() {
	var r verbstest.Recorder
	r.Run("Example", func(t verbstest.TB) {
		w := verbstest.New(t, verbstest.Options{Seed: 1, Faults: "drop op=RC_RDMA_WRITE_MIDDLE tx=1"})
		a, b := w.Pair("a", "b", verbstest.QPOptions{FixedPSN: true})
		src, dst := a.Host.Buffer(3000), b.Host.Buffer(3000)
		copy(src.Bytes(), strings.Repeat("rocesim ", 375))
		a.QP.PostSend([]verbs.SendWR{{WRID: 1, Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled,
			SGList: []verbs.SGE{src.SGE(0, 3000)}, RemoteAddr: dst.Addr, RKey: dst.RKey}})

		wc := w.RequireCompletion(a.CQ, verbs.WCSuccess, verbs.WCRDMAWrite)
		fmt.Println("completion:", wc.Status.Name(), "at", w.Now())
		fmt.Println("data intact:", string(dst.Bytes()) == string(src.Bytes()))
		for _, f := range w.Frames("") {
			fmt.Printf("%-8v %s %-22s tx=%d %s\n", f.Time, f.Dir, f.Packet.Info.Name, f.Tx, f.Comment)
		}
	})
	fmt.Println(r.Output())
	// Output:
	// completion: IBV_WC_SUCCESS at 4.359µs
	// data intact: true
	// 0s       a->b RC_RDMA_WRITE_FIRST    tx=1 wr 1 RDMA_WRITE, packet 1 of 3
	// 90ns     a->b RC_RDMA_WRITE_MIDDLE   tx=1 wr 1 RDMA_WRITE, packet 2 of 3; dropped by rule 1: drop op=RC_RDMA_WRITE_MIDDLE tx=1
	// 90ns     a->b RC_RDMA_WRITE_LAST     tx=1 wr 1 RDMA_WRITE, packet 3 of 3
	// 1.173µs  b->a RC_ACKNOWLEDGE         tx=1 NAK: PSN 1 expected, PSN 2 received
	// 2.18µs   a->b RC_RDMA_WRITE_MIDDLE   tx=2 retransmission #1 of PSN 1 after NAK
	// 2.269µs  a->b RC_RDMA_WRITE_LAST     tx=2 retransmission #1 of PSN 2 after NAK
	// 3.352µs  b->a RC_ACKNOWLEDGE         tx=1 ACK of everything up to PSN 2
}

// A receiver whose application falls behind: while its polling loop is
// paused it posts no receive, so the sender's SEND meets RNR NAKs until
// the loop runs again and posts one.
func ExamplePoller_Pause() {
	var r verbstest.Recorder
	r.Run("ExamplePoller_Pause", func(t verbstest.TB) {
		w := verbstest.New(t, verbstest.Options{})
		a, b := w.Pair("a", "b", verbstest.QPOptions{MinRNRTimer: 4}) // RNR timer 40 µs
		src, dst := a.Host.Buffer(64), b.Host.Buffer(64)
		posted := 0 // b's application keeps one receive posted
		app := w.Poll("b-app", func() {
			var wc [4]verbs.WC
			posted -= b.CQ.Poll(wc[:])
			for ; posted < 1; posted++ {
				b.QP.PostRecv([]verbs.RecvWR{{WRID: 1, SGList: []verbs.SGE{dst.SGE(0, 64)}}})
			}
		})
		app.Pause(100 * sim.Microsecond) // descheduled before it posted anything
		a.QP.PostSend([]verbs.SendWR{{WRID: 7, Opcode: verbs.WRSend, Flags: verbs.SendSignaled,
			SGList: []verbs.SGE{src.SGE(0, 64)}}})
		w.RequireCompletion(a.CQ, verbs.WCSuccess, verbs.WCSend)
		fmt.Println("RNR NAKs:", len(w.Frames("class=rnr")), "then success at", w.Now())
	})
	fmt.Println(r.Output())
	// Output:
	// RNR NAKs: 3 then success at 128.076µs
}

// A dead peer: the link is cut in the middle of the test, and the WR in
// flight fails after its retry budget (retry_cnt 2: three transmissions,
// three timeouts); the WR behind it is flushed.
func ExampleWorld_AddFaults() {
	var r verbstest.Recorder
	r.Run("ExampleWorld_AddFaults", func(t verbstest.TB) {
		w := verbstest.New(t, verbstest.Options{Nodes: []string{"client", "server"}})
		c, s := w.Pair("client", "server", verbstest.QPOptions{Timeout: 12, RetryCnt: 2}) // 4.096 µs × 2^12 = 16.8 ms: rxe waits 4 jiffies, 16 ms
		src, dst := c.Host.Buffer(64), s.Host.Buffer(64)
		w.AddFaults("down link=" + s.Host.LinkName())
		for id := uint64(1); id <= 2; id++ {
			c.QP.PostSend([]verbs.SendWR{{WRID: id, Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled,
				SGList: []verbs.SGE{src.SGE(0, 64)}, RemoteAddr: dst.Addr, RKey: dst.RKey}})
		}
		w.RequireCompletion(c.CQ, verbs.WCRetryExcErr, verbs.WCRDMAWrite)
		fmt.Println("retry budget spent at", w.Now())
		wc := w.RequireCompletion(c.CQ, verbs.WCWRFlushErr, verbs.WCRDMAWrite)
		fmt.Println("wr", wc.WRID, wc.Status.Name())
		fmt.Println("client QP:", c.QP.State())
	})
	fmt.Println(r.Output())
	// Output:
	// retry budget spent at 48ms
	// wr 2 IBV_WC_WR_FLUSH_ERR
	// client QP: ERR
}

// Three hosts through a switch, one RC QP per peer: each host SENDs a
// greeting to each other host over that peer's QP.
func ExampleWorld_Mesh() {
	var r verbstest.Recorder
	r.Run("ExampleWorld_Mesh", func(t verbstest.TB) {
		w := verbstest.New(t, verbstest.Options{Nodes: []string{"x", "y", "z"}})
		m := w.Mesh(verbstest.QPOptions{})
		inbox := map[string]*verbs.MR{} // 8 bytes per sender
		for _, h := range w.Hosts() {
			inbox[h.Name()] = h.Buffer(8 * len(w.Hosts()))
		}
		for i, from := range w.Hosts() {
			for _, to := range w.Hosts() {
				if from == to {
					continue
				}
				e := m.Get(from.Name(), to.Name())
				e.Peer.QP.PostRecv([]verbs.RecvWR{{WRID: 1, SGList: []verbs.SGE{inbox[to.Name()].SGE(uint64(8*i), 8)}}})
				msg := from.Buffer(8)
				copy(msg.Bytes(), "from "+from.Name())
				e.QP.PostSend([]verbs.SendWR{{WRID: 2, Opcode: verbs.WRSend, Flags: verbs.SendSignaled,
					SGList: []verbs.SGE{msg.SGE(0, 6)}}})
			}
		}
		for _, h := range w.Hosts() {
			w.Await(m.CQ(h.Name()), 4) // two SENDs out, two in
			fmt.Printf("%s got %q\n", h.Name(), strings.FieldsFunc(string(inbox[h.Name()].Bytes()), func(r rune) bool { return r == 0 }))
		}
		fmt.Println("requests:", len(w.Frames("class=request")), "(one per QP)")
		fmt.Println("frames on link y-sw:", len(w.Frames("link=y-sw")), "(y's two SENDs and ACKs out, two SENDs and ACKs in)")
	})
	fmt.Println(r.Output())
	// Output:
	// x got ["from y" "from z"]
	// y got ["from x" "from z"]
	// z got ["from x" "from y"]
	// requests: 6 (one per QP)
	// frames on link y-sw: 8 (y's two SENDs and ACKs out, two SENDs and ACKs in)
}

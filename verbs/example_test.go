package verbs_test

import (
	"fmt"

	"github.com/rocesim/rocesim/faults"
	"github.com/rocesim/rocesim/sim"
	"github.com/rocesim/rocesim/verbs"
)

// ExampleHost_GetDeviceList lists a host's RDMA devices and their first
// port, as ibv_devinfo does.
func ExampleHost_GetDeviceList() {
	w := verbs.NewWorld(verbs.WorldConfig{Seed: 1})
	h := w.AddHost("a")
	for _, d := range h.GetDeviceList() {
		ctx, _ := d.Open()
		port, _ := ctx.QueryPort(1)
		gid, _ := ctx.QueryGID(1, 1)
		fmt.Println(d.Name(), port.State, "active_mtu", port.ActiveMTU.Bytes(), "gid[1]", gid)
	}
	// Output: rxe0 ACTIVE active_mtu 1024 gid[1] ::ffff:10.0.0.1
}

// endpoint is one side of an RC connection, set up as a C program would.
type endpoint struct {
	host  *verbs.Host
	ctx   *verbs.Context
	pd    *verbs.PD
	cq    *verbs.CQ
	qp    *verbs.QP
	buf   []byte
	mr    *verbs.MR
	psn   uint32
	retry uint8 // retry_cnt at RTS
	rnr   uint8 // rnr_retry at RTS
	rd    uint8 // max_rd_atomic and max_dest_rd_atomic (0: 1)
}

func setup(h *verbs.Host, psn uint32) *endpoint {
	e := &endpoint{host: h, psn: psn, retry: 7, rnr: 7}
	e.ctx, _ = h.GetDeviceList()[0].Open()
	e.pd, _ = e.ctx.AllocPD()
	e.cq, _ = e.ctx.CreateCQ(16, nil, 0)
	e.buf = make([]byte, 4096)
	e.mr, _ = e.pd.RegMR(e.buf, verbs.AccessLocalWrite|verbs.AccessRemoteWrite|verbs.AccessRemoteRead)
	e.qp, _ = e.pd.CreateQP(verbs.QPInitAttr{SendCQ: e.cq, RecvCQ: e.cq, Type: verbs.QPTypeRC,
		Cap: verbs.QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1}})
	return e
}

// connect takes the QP through INIT, RTR and RTS toward the peer, with
// the attribute masks ibv_rc_pingpong uses.
func (e *endpoint) connect(peer *endpoint) error {
	if err := e.qp.Modify(&verbs.QPAttr{QPState: verbs.QPStateInit, PKeyIndex: 0, PortNum: 1,
		QPAccessFlags: verbs.AccessRemoteWrite | verbs.AccessRemoteRead | verbs.AccessRemoteAtomic},
		verbs.QPAttrState|verbs.QPAttrPKeyIndex|verbs.QPAttrPort|verbs.QPAttrAccessFlags); err != nil {
		return err
	}
	gid, _ := peer.ctx.QueryGID(1, 1)
	rtr := verbs.QPAttr{QPState: verbs.QPStateRTR, PathMTU: verbs.MTU1024, DestQPNum: peer.qp.QPNum,
		RQPSN: peer.psn, MaxDestRdAtomic: max(1, e.rd), MinRNRTimer: 12,
		AHAttr: verbs.AHAttr{IsGlobal: true, PortNum: 1, GRH: verbs.GRH{DGID: gid, HopLimit: 1, SGIDIndex: 1}}}
	if err := e.qp.Modify(&rtr, verbs.QPAttrState|verbs.QPAttrAV|verbs.QPAttrPathMTU|verbs.QPAttrDestQPN|
		verbs.QPAttrRQPSN|verbs.QPAttrMaxDestRdAtomic|verbs.QPAttrMinRNRTimer); err != nil {
		return err
	}
	rts := verbs.QPAttr{QPState: verbs.QPStateRTS, Timeout: 14, RetryCnt: e.retry, RNRRetry: e.rnr, SQPSN: e.psn, MaxRdAtomic: max(1, e.rd)}
	return e.qp.Modify(&rts, verbs.QPAttrState|verbs.QPAttrTimeout|verbs.QPAttrRetryCnt|
		verbs.QPAttrRNRRetry|verbs.QPAttrSQPSN|verbs.QPAttrMaxQPRdAtomic)
}

// Example_pingPong connects two RC QPs by hand and bounces a message:
// a SEND from a to b, and b's answer.
func Example_pingPong() {
	w := verbs.NewWorld(verbs.WorldConfig{Seed: 1})
	ha, hb := w.AddHost("a"), w.AddHost("b")
	if err := w.Connect(ha, hb); err != nil {
		panic(err)
	}
	a, b := setup(ha, 100), setup(hb, 200)
	if err := a.connect(b); err != nil {
		panic(err)
	}
	if err := b.connect(a); err != nil {
		panic(err)
	}
	wcs := make([]verbs.WC, 4)

	b.qp.PostRecv([]verbs.RecvWR{{WRID: 1, SGList: []verbs.SGE{b.mr.SGE(0, 4096)}}})
	copy(a.buf, "ping")
	a.qp.PostSend([]verbs.SendWR{{WRID: 2, Opcode: verbs.WRSend, Flags: verbs.SendSignaled, SGList: []verbs.SGE{a.mr.SGE(0, 4)}}})
	w.Run()
	n := b.cq.Poll(wcs)
	fmt.Println("b:", wcs[0].Status, wcs[0].Opcode, wcs[0].ByteLen, string(b.buf[:wcs[0].ByteLen]), n)
	n = a.cq.Poll(wcs)
	fmt.Println("a:", wcs[0].Status, wcs[0].Opcode, n)

	a.qp.PostRecv([]verbs.RecvWR{{WRID: 3, SGList: []verbs.SGE{a.mr.SGE(0, 4096)}}})
	copy(b.buf, "pong")
	b.qp.PostSend([]verbs.SendWR{{WRID: 4, Opcode: verbs.WRSend, Flags: verbs.SendSignaled, SGList: []verbs.SGE{b.mr.SGE(0, 4)}}})
	w.Run()
	a.cq.Poll(wcs)
	fmt.Println("a:", wcs[0].Status, string(a.buf[:wcs[0].ByteLen]), "at", w.Now())
	// Output:
	// b: success IBV_WC_RECV 4 ping 1
	// a: success IBV_WC_SEND 1
	// a: success pong at 4.028µs
}

// Example_writeWithImm writes 3000 bytes into the peer's buffer (three
// packets at path MTU 1024) with immediate data, which consumes a
// receive at the peer and reports the immediate there.
func Example_writeWithImm() {
	w := verbs.NewWorld(verbs.WorldConfig{Seed: 1})
	ha, hb := w.AddHost("a"), w.AddHost("b")
	w.Connect(ha, hb)
	a, b := setup(ha, 1), setup(hb, 1)
	a.connect(b)
	b.connect(a)
	for i := range 3000 {
		a.buf[i] = byte(i)
	}
	b.qp.PostRecv([]verbs.RecvWR{{WRID: 7}})
	a.qp.PostSend([]verbs.SendWR{{WRID: 8, Opcode: verbs.WRRDMAWriteWithImm, Flags: verbs.SendSignaled,
		ImmData: 0xCAFE, RemoteAddr: b.mr.Addr + 512, RKey: b.mr.RKey,
		SGList: []verbs.SGE{a.mr.SGE(0, 3000)}}})
	w.Run()
	wcs := make([]verbs.WC, 2)
	b.cq.Poll(wcs)
	fmt.Printf("b: %v %v byte_len=%d imm=%#x\n", wcs[0].Status, wcs[0].Opcode, wcs[0].ByteLen, wcs[0].ImmData)
	ok := true
	for i := range 3000 {
		ok = ok && b.buf[512+i] == byte(i)
	}
	fmt.Println("bytes landed:", ok)
	a.cq.Poll(wcs)
	fmt.Printf("a: %v %v byte_len=%d\n", wcs[0].Status, wcs[0].Opcode, wcs[0].ByteLen) // rxe reports the message length
	// Output:
	// b: success IBV_WC_RECV_RDMA_WITH_IMM byte_len=3000 imm=0xcafe
	// bytes landed: true
	// a: success IBV_WC_RDMA_WRITE byte_len=3000
}

// Example_rnrRetryExceeded sends to a peer that has posted no receive,
// with rnr_retry 0: the first RNR NAK fails the SEND with
// IBV_WC_RNR_RETRY_EXC_ERR, the QP goes to ERR, and the WR behind it is
// flushed. An error completion's opcode is not valid (libibverbs
// promises only wr_id, status, qp_num and vendor_err), so check the
// status, by name.
func Example_rnrRetryExceeded() {
	w := verbs.NewWorld(verbs.WorldConfig{Seed: 1})
	ha, hb := w.AddHost("a"), w.AddHost("b")
	w.Connect(ha, hb)
	a, b := setup(ha, 0), setup(hb, 0)
	a.rnr = 0
	a.connect(b)
	b.connect(a)
	a.qp.PostSend([]verbs.SendWR{
		{WRID: 1, Opcode: verbs.WRSend, Flags: verbs.SendSignaled, SGList: []verbs.SGE{a.mr.SGE(0, 8)}},
		{WRID: 2, Opcode: verbs.WRSend, Flags: verbs.SendSignaled, SGList: []verbs.SGE{a.mr.SGE(8, 8)}},
	})
	w.Run()
	wcs := make([]verbs.WC, 4)
	for _, wc := range wcs[:a.cq.Poll(wcs)] {
		fmt.Println("wr", wc.WRID, wc.Status.Name(), wc.Status == verbs.WCRNRRetryExcErr)
	}
	fmt.Println("a's QP:", a.qp.State(), a.qp.State() == verbs.QPStateErr)
	// Output:
	// wr 1 IBV_WC_RNR_RETRY_EXC_ERR true
	// wr 2 IBV_WC_WR_FLUSH_ERR false
	// a's QP: ERR true
}

// ExampleContext_GetAsyncEvent cuts a host's link: its port goes down,
// as rxe's does when its netdev loses carrier, and the context reports
// IBV_EVENT_PORT_ERR; the link back up gives IBV_EVENT_PORT_ACTIVE.
func ExampleContext_GetAsyncEvent() {
	w := verbs.NewWorld(verbs.WorldConfig{Seed: 1})
	ha, hb := w.AddHost("a"), w.AddHost("b")
	w.Connect(ha, hb)
	ctx, _ := ha.GetDeviceList()[0].Open()
	show := func() {
		for ev, ok := ctx.GetAsyncEvent(); ok; ev, ok = ctx.GetAsyncEvent() {
			port, _ := ctx.QueryPort(ev.Port)
			fmt.Println(ev.Type, "port", ev.Port, "state", port.State)
		}
	}
	down, _ := faults.Parse("down link=a-b")
	w.SetPlan(down)
	w.RunFor(sim.Millisecond)
	show()
	w.SetPlan(nil)
	w.RunFor(sim.Millisecond)
	show()
	port, _ := ctx.QueryPort(1)
	fmt.Println(port.State == verbs.PortStateActive)
	// Output:
	// PORT_ERR port 1 state DOWN
	// PORT_ACTIVE port 1 state ACTIVE
	// true
}

package main

import (
	"fmt"
	"io"

	"github.com/rocesim/rocesim/faults"
	"github.com/rocesim/rocesim/sim"
	"github.com/rocesim/rocesim/verbs"
)

// The built-in demo until the scenario catalogue (issue 6) arrives: the
// go-back-N ladder. Host a sends one 4 KiB SEND (four packets at path MTU
// 1024) to host b over RC; the fault plan loses PSN 101 on its first
// transmission. b NAKs the gap, a goes back and resends, one cumulative
// ACK completes the message.
const demoPlan = "drop psn=101 tx=1 src=a\n"

// runDemo runs the demo and prints its trace, one event a line.
func runDemo(stdout io.Writer) error {
	plan, err := faults.Parse(demoPlan)
	if err != nil {
		return err
	}
	tr := &sim.Trace{}
	w := verbs.NewWorld(verbs.WorldConfig{Seed: 1, Plan: plan, Trace: tr})
	ha, hb := w.AddHost("a"), w.AddHost("b")
	if err := w.Connect(ha, hb); err != nil {
		return err
	}
	a, err := demoEndpoint(ha, 100)
	if err != nil {
		return err
	}
	b, err := demoEndpoint(hb, 200)
	if err != nil {
		return err
	}
	if err := a.connect(b); err != nil {
		return err
	}
	if err := b.connect(a); err != nil {
		return err
	}
	if _, err := b.qp.PostRecv([]verbs.RecvWR{{WRID: 1, SGList: []verbs.SGE{b.mr.SGE(0, 4096)}}}); err != nil {
		return err
	}
	if _, err := a.qp.PostSend([]verbs.SendWR{{WRID: 2, Opcode: verbs.WRSend, Flags: verbs.SendSignaled,
		SGList: []verbs.SGE{a.mr.SGE(0, 4096)}}}); err != nil {
		return err
	}
	if err := w.Run(); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "rocesim demo: a 4-packet RC SEND from a to b, fault plan %q\n\n", demoPlan[:len(demoPlan)-1])
	for _, e := range tr.Events() {
		switch e.Kind {
		case "frame-tx", "frame-drop", "completion", "timer":
			fmt.Fprintln(stdout, e.String())
		}
	}
	wcs := make([]verbs.WC, 2)
	n := b.cq.Poll(wcs)
	fmt.Fprintf(stdout, "\nb received %d message(s); virtual time %v. The ladder diagrams and scenario catalogue arrive with issue 6;\nmeanwhile: rocesim inspect wire/testdata/rc_send.pcap\n", n, w.Now())
	return nil
}

type demoEnd struct {
	ctx *verbs.Context
	pd  *verbs.PD
	cq  *verbs.CQ
	qp  *verbs.QP
	mr  *verbs.MR
	psn uint32
}

func demoEndpoint(h *verbs.Host, psn uint32) (*demoEnd, error) {
	e := &demoEnd{psn: psn}
	var err error
	if e.ctx, err = h.GetDeviceList()[0].Open(); err != nil {
		return nil, err
	}
	if e.pd, err = e.ctx.AllocPD(); err != nil {
		return nil, err
	}
	if e.cq, err = e.ctx.CreateCQ(16, nil, 0); err != nil {
		return nil, err
	}
	buf := make([]byte, 4096)
	for i := range buf {
		buf[i] = byte(i)
	}
	if e.mr, err = e.pd.RegMR(buf, verbs.AccessLocalWrite|verbs.AccessRemoteWrite); err != nil {
		return nil, err
	}
	e.qp, err = e.pd.CreateQP(verbs.QPInitAttr{SendCQ: e.cq, RecvCQ: e.cq, Type: verbs.QPTypeRC,
		Cap: verbs.QPCap{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}})
	return e, err
}

// connect moves the QP through INIT, RTR and RTS toward peer.
func (e *demoEnd) connect(peer *demoEnd) error {
	if err := e.qp.Modify(&verbs.QPAttr{QPState: verbs.QPStateInit, PortNum: 1, QPAccessFlags: verbs.AccessRemoteWrite},
		verbs.QPAttrState|verbs.QPAttrPKeyIndex|verbs.QPAttrPort|verbs.QPAttrAccessFlags); err != nil {
		return err
	}
	gid, err := peer.ctx.QueryGID(1, 1)
	if err != nil {
		return err
	}
	if err := e.qp.Modify(&verbs.QPAttr{QPState: verbs.QPStateRTR, PathMTU: verbs.MTU1024, DestQPNum: peer.qp.QPNum,
		RQPSN: peer.psn, MaxDestRdAtomic: 1, MinRNRTimer: 12,
		AHAttr: verbs.AHAttr{IsGlobal: true, PortNum: 1, GRH: verbs.GRH{DGID: gid, SGIDIndex: 1}}},
		verbs.QPAttrState|verbs.QPAttrAV|verbs.QPAttrPathMTU|verbs.QPAttrDestQPN|verbs.QPAttrRQPSN|
			verbs.QPAttrMaxDestRdAtomic|verbs.QPAttrMinRNRTimer); err != nil {
		return err
	}
	return e.qp.Modify(&verbs.QPAttr{QPState: verbs.QPStateRTS, Timeout: 14, RetryCnt: 7, RNRRetry: 7, SQPSN: e.psn, MaxRdAtomic: 1},
		verbs.QPAttrState|verbs.QPAttrTimeout|verbs.QPAttrRetryCnt|verbs.QPAttrRNRRetry|verbs.QPAttrSQPSN|verbs.QPAttrMaxQPRdAtomic)
}

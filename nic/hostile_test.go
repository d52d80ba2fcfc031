package nic_test

import (
	"bytes"
	"fmt"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocesim/rocesim/nic"
	"github.com/rocesim/rocesim/wire"
)

// The rig: one target device (10.0.0.2) with live QPs and MRs of known
// contents, fed frames built as if a peer at 10.0.0.1 sent them. The
// hostile-frame table and FuzzReceive share it.

var (
	rigPeerMAC = wire.MAC{2, 0, 0, 0, 0, 1}
	rigMAC     = wire.MAC{2, 0, 0, 0, 0, 2}
	rigPeerIP  = netip.AddrFrom4([4]byte{10, 0, 0, 1})
	rigIP      = netip.AddrFrom4([4]byte{10, 0, 0, 2})
)

const (
	rigPeerQPN = 0x99       // the peer's QPN the connected QPs point at
	rigRQPSN   = 1000       // the RC and UC QPs' expected PSN
	rigSQPSN   = 5000       // the RC QP's first send PSN
	rigQKey    = 0x11111111 // the UD QP's Q_Key
	rigMRLen   = 4096
)

// rig is the target device and its resources.
type rig struct {
	dev         *nic.Device
	pd, otherPD *nic.PD
	cq          *nic.CQ
	// MRs, each filled with its own pattern.
	rw      *nic.MR // LOCAL_WRITE|REMOTE_WRITE|REMOTE_READ|REMOTE_ATOMIC: the granted target
	ro      *nic.MR // REMOTE_READ only
	local   *nic.MR // LOCAL_WRITE only: never remotely accessible
	other   *nic.MR // every right, but in another PD
	recv    *nic.MR // LOCAL_WRITE: receive buffers
	mrs     []*nic.MR
	evs     []nic.AsyncEvent // asynchronous events drained, not yet read
	before  [][]byte         // every MR's bytes at the start
	rc, uc  *nic.QP          // connected, RTS
	ud      *nic.QP          // RTS
	initQP  *nic.QP          // RC left in INIT
	resetQP *nic.QP          // RC left in RESET
	// frames the device sent, decoded views kept as copies
	out [][]byte
}

// rigOptions adjust the rig before its QPs are connected.
type rigOptions struct {
	rcAccess nic.AccessFlags // the RC QP's qp_access_flags; 0 means all remote rights
	// outstanding posts a WRITE, a READ and an atomic on the RC QP, so
	// that responses have something to complete (the fuzzer's).
	outstanding bool
	profile     nic.Profile // the device's profile; 0 is rxe's
	retryCnt    uint8       // the RC QP's retry_cnt; 0 means 7
}

func newRig(t testing.TB, o rigOptions) *rig {
	r := &rig{dev: nic.New(nic.Config{Name: "rxe0", MAC: rigMAC, IPv4: rigIP, Profile: o.profile})}
	r.dev.AddNeighbour(rigPeerIP, rigPeerMAC)
	var err error
	must := func(e error) {
		if e != nil {
			t.Fatal(e)
		}
	}
	r.pd, err = r.dev.AllocPD()
	must(err)
	r.otherPD, err = r.dev.AllocPD()
	must(err)
	r.cq, err = r.dev.CreateCQ(256, nil, 0)
	must(err)
	reg := func(pd *nic.PD, acc nic.AccessFlags, fill byte) *nic.MR {
		buf := make([]byte, rigMRLen)
		for i := range buf {
			buf[i] = fill + byte(i*7)
		}
		mr, err := r.dev.RegMR(pd, buf, acc)
		must(err)
		r.mrs = append(r.mrs, mr)
		r.before = append(r.before, bytes.Clone(buf))
		return mr
	}
	all := nic.AccessLocalWrite | nic.AccessRemoteWrite | nic.AccessRemoteRead | nic.AccessRemoteAtomic
	r.rw = reg(r.pd, all, 0x10)
	r.ro = reg(r.pd, nic.AccessRemoteRead, 0x20)
	r.local = reg(r.pd, nic.AccessLocalWrite, 0x30)
	r.other = reg(r.otherPD, all, 0x40)
	r.recv = reg(r.pd, nic.AccessLocalWrite, 0x50)

	mk := func(typ nic.QPType) *nic.QP {
		qp, err := r.dev.CreateQP(r.pd, nic.QPInitAttr{SendCQ: r.cq, RecvCQ: r.cq, Type: typ,
			Cap: nic.QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1}})
		must(err)
		return qp
	}
	access := o.rcAccess
	if access == 0 {
		access = nic.AccessRemoteWrite | nic.AccessRemoteRead | nic.AccessRemoteAtomic
	}
	av := nic.AHAttr{IsGlobal: true, PortNum: 1, GRH: nic.GRH{DGID: rigPeerIP, HopLimit: 1}}
	connect := func(qp *nic.QP, access nic.AccessFlags, ready bool) {
		must(r.dev.ModifyQP(0, qp, &nic.QPAttr{QPState: nic.QPStateInit, PortNum: 1, QPAccessFlags: access},
			nic.QPAttrState|nic.QPAttrPKeyIndex|nic.QPAttrPort|nic.QPAttrAccessFlags))
		if !ready {
			return
		}
		rtr := nic.QPAttr{QPState: nic.QPStateRTR, PathMTU: nic.MTU1024, DestQPNum: rigPeerQPN, RQPSN: rigRQPSN, AHAttr: av}
		mask := nic.QPAttrState | nic.QPAttrAV | nic.QPAttrPathMTU | nic.QPAttrDestQPN | nic.QPAttrRQPSN
		if qp.Type() == nic.QPTypeRC {
			rtr.MaxDestRdAtomic, rtr.MinRNRTimer = 4, 12
			mask |= nic.QPAttrMaxDestRdAtomic | nic.QPAttrMinRNRTimer
		}
		must(r.dev.ModifyQP(0, qp, &rtr, mask))
		rts := nic.QPAttr{QPState: nic.QPStateRTS, SQPSN: rigSQPSN, Timeout: 14, RetryCnt: 7, RNRRetry: 7, MaxRdAtomic: 4}
		if o.retryCnt != 0 {
			rts.RetryCnt = o.retryCnt
		}
		mask = nic.QPAttrState | nic.QPAttrSQPSN
		if qp.Type() == nic.QPTypeRC {
			mask |= nic.QPAttrTimeout | nic.QPAttrRetryCnt | nic.QPAttrRNRRetry | nic.QPAttrMaxQPRdAtomic
		}
		must(r.dev.ModifyQP(0, qp, &rts, mask))
	}
	r.rc = mk(nic.QPTypeRC)
	connect(r.rc, access, true)
	r.uc = mk(nic.QPTypeUC)
	connect(r.uc, nic.AccessRemoteWrite, true)
	r.ud = mk(nic.QPTypeUD)
	must(r.dev.ModifyQP(0, r.ud, &nic.QPAttr{QPState: nic.QPStateInit, PortNum: 1, QKey: rigQKey},
		nic.QPAttrState|nic.QPAttrPKeyIndex|nic.QPAttrPort|nic.QPAttrQKey))
	must(r.dev.ModifyQP(0, r.ud, &nic.QPAttr{QPState: nic.QPStateRTR}, nic.QPAttrState))
	must(r.dev.ModifyQP(0, r.ud, &nic.QPAttr{QPState: nic.QPStateRTS, SQPSN: 1}, nic.QPAttrState|nic.QPAttrSQPSN))
	r.initQP = mk(nic.QPTypeRC)
	connect(r.initQP, access, false)
	r.resetQP = mk(nic.QPTypeRC)

	// Two receives of 1024 bytes on each QP with a receive queue, in the
	// receive MR (slots 0..3 of 1024 bytes, reused across QPs).
	for i, qp := range []*nic.QP{r.rc, r.uc, r.ud, r.initQP} {
		for j := range 2 {
			off := uint64((i+j)%4) * 1024
			_, err := r.dev.PostRecv(0, qp, []nic.RecvWR{{WRID: uint64(100*i + j),
				SGList: []nic.SGE{{Addr: r.recv.Addr + off, Length: 1024, LKey: r.recv.LKey}}}})
			must(err)
		}
	}
	if o.outstanding {
		local := []nic.SGE{{Addr: r.recv.Addr, Length: 64, LKey: r.recv.LKey}}
		_, err := r.dev.PostSend(0, r.rc, []nic.SendWR{
			{WRID: 1, Opcode: nic.WRRDMAWrite, Flags: nic.SendSignaled, SGList: local, RemoteAddr: 0x1000, RKey: 0x100},
			{WRID: 2, Opcode: nic.WRRDMARead, Flags: nic.SendSignaled, SGList: local, RemoteAddr: 0x1000, RKey: 0x100},
			{WRID: 3, Opcode: nic.WRAtomicFetchAndAdd, Flags: nic.SendSignaled,
				SGList: []nic.SGE{{Addr: r.recv.Addr + 64, Length: 8, LKey: r.recv.LKey}}, RemoteAddr: 0x1000, RKey: 0x100, CompareAdd: 1},
		})
		must(err)
	}
	r.drain()
	r.out = nil
	r.events()
	return r
}

// drain collects the frames and asynchronous events the device put out.
func (r *rig) drain() { r.out, r.evs = takeReady(r.dev, r.out, r.evs) }

// events returns the asynchronous events put out since the last call.
func (r *rig) events() string {
	r.drain()
	s := make([]string, len(r.evs))
	for i, e := range r.evs {
		s[i] = e.Type.String()
	}
	r.evs = r.evs[:0]
	return fmt.Sprint(s)
}

// responses describes the frames sent since the last call, one line
// each: opcode, AETH syndrome, PSN.
func (r *rig) responses(t testing.TB) []string {
	r.drain()
	var s []string
	var p wire.Packet
	for _, f := range r.out {
		require.NoError(t, p.Decode(f))
		line := fmt.Sprintf("%s psn=%d", p.BTH.Opcode(), p.BTH.PSN())
		if p.AETH != nil {
			line += " " + p.AETH.Syndrome().String()
		}
		s = append(s, line)
	}
	r.out = nil
	return s
}

// landed records that data was legitimately placed at off in mr, so
// memoryChanged expects it there.
func (r *rig) landed(mr *nic.MR, off uint64, data []byte) {
	for i, m := range r.mrs {
		if m == mr {
			copy(r.before[i][off:], data)
		}
	}
}

// memoryChanged names the MRs whose bytes differ from the start.
func (r *rig) memoryChanged() []string {
	var s []string
	names := []string{"rw", "ro", "local", "other", "recv"}
	for i, mr := range r.mrs {
		if !bytes.Equal(mr.Bytes(), r.before[i]) {
			s = append(s, names[i])
		}
	}
	return s
}

// pkt describes one frame from the peer to the rig.
type pkt struct {
	op      wire.Opcode
	qpn     uint32 // 0: the RC QP
	psn     uint32 // PSN relative to rigRQPSN (mod 2^24)
	pkey    uint16 // 0: 0xFFFF
	qkey    uint32 // UD; 0: rigQKey
	reth    wire.RETHFields
	atomic  wire.AtomicETHFields
	payload []byte
	dst     netip.Addr // zero: the rig
	padLie  int8       // added to the BTH pad count after encoding (ICRC recomputed)
	badICRC bool
	noAck   bool // AckReq clear
}

// frame encodes p with a correct ICRC (unless badICRC).
func (r *rig) frame(t testing.TB, p pkt) []byte {
	f := wire.Frame{DstMAC: rigMAC, SrcMAC: rigPeerMAC, Src: rigPeerIP, Dst: rigIP, TTL: 64,
		SrcPort: 0xC000, Payload: p.payload}
	if p.dst.IsValid() {
		f.Dst = p.dst
	}
	f.BTH = wire.BTHFields{Opcode: p.op, PKey: 0xFFFF, DestQP: p.qpn, AckReq: !p.noAck, PSN: wire.PSN(rigRQPSN).Add(p.psn)}
	if p.qpn == 0 {
		f.BTH.DestQP = r.rc.Num()
	}
	if p.pkey != 0 {
		f.BTH.PKey = p.pkey
	}
	f.DETH = wire.DETHFields{QKey: rigQKey, SrcQP: rigPeerQPN}
	if p.qkey != 0 {
		f.DETH.QKey = p.qkey
	}
	f.RETH, f.AtomicETH = p.reth, p.atomic
	buf := make([]byte, 9000)
	n, err := wire.Encode(buf, &f)
	require.NoError(t, err)
	b := buf[:n]
	if p.padLie != 0 || p.badICRC {
		var d wire.Packet
		require.NoError(t, d.DecodeHeaders(b))
		pc := int8(d.BTH.PadCount()) + p.padLie
		d.BTH[1] = d.BTH[1]&^0x30 | byte(pc&3)<<4
		d.UpdateICRC()
		if p.badICRC {
			d.ICRC[0] ^= 0xFF
		}
	}
	return b
}

// TestHostileFrames feeds frames with a valid ICRC (unless the row says
// otherwise) and lying headers to the rig. Each row asserts the frames
// the device answers with, the counter that accounts for the frame, the
// RC QP's state and, for every row, that no MR changed by a byte.
func TestHostileFrames(t *testing.T) {
	rw := func(r *rig, off uint64) uint64 { return r.rw.Addr + off }
	nak := func(psn int, what string) string {
		return fmt.Sprintf("RC_ACKNOWLEDGE psn=%d NAK(%s)", rigRQPSN+psn, what)
	}
	type counterCheck struct {
		name string
		get  func(r *rig) uint64
	}
	drop := func(why nic.RxDrop) counterCheck {
		return counterCheck{"drop " + why.String(), func(r *rig) uint64 { return r.dev.RxDrops(why) }}
	}
	counter := func(c nic.Counter) counterCheck {
		return counterCheck{c.String(), func(r *rig) uint64 { return r.dev.Counters()[c] }}
	}
	rxErr := func(c wire.ErrorCode) counterCheck {
		return counterCheck{"rx error " + c.String(), func(r *rig) uint64 { return r.dev.RxErrors(c) }}
	}
	ones := func(n int) []byte { return bytes.Repeat([]byte{0xEE}, n) }
	rows := []struct {
		name    string
		opts    rigOptions
		pkts    func(r *rig) []pkt
		want    []string     // the frames the device sends back
		counter counterCheck // must read 1 (or, with n, n)
		n       uint64
		state   nic.QPState // the RC QP's state after
		// landed is the first packet of a message accepted before the
		// violation: it places its payload, as rxe does.
		landed func(r *rig)
	}{
		// rxe hdr_check: rxe_pool_get_index finds no QP → drop, uncounted
		// by rxe (rocesim: RxDrops(DropNoQP)); IBTA §9.6.1.4 (C9-54?): an
		// invalid destination QP is silently dropped.
		{name: "wrong destination QPN", pkts: func(r *rig) []pkt {
			return []pkt{{op: wire.OpRCSendOnly, qpn: 0x500, payload: ones(8)}}
		}, counter: drop(nic.DropNoQP), state: nic.QPStateRTS},
		// rxe_chk_dgid: another IP address → drop.
		{name: "not our IP address", pkts: func(r *rig) []pkt {
			return []pkt{{op: wire.OpRCSendOnly, payload: ones(8), dst: netip.AddrFrom4([4]byte{10, 0, 0, 9})}}
		}, counter: drop(nic.DropNotLocal), state: nic.QPStateRTS},
		// rxe_icrc_check: drop, uncounted by rxe; rocesim counts it.
		{name: "bad ICRC", pkts: func(r *rig) []pkt {
			return []pkt{{op: wire.OpRCWriteOnly, reth: wire.RETHFields{VA: rw(r, 0), RKey: r.rw.RKey, DMALength: 8}, payload: ones(8), badICRC: true}}
		}, counter: rxErr(wire.CodeICRC), state: nic.QPStateRTS},
		// rxe check_psn: diff > 0 → one NAK PSN sequence error carrying the
		// expected PSN per gap (out_of_seq_request), the rest dropped
		// (IBTA §9.7.5.1.2, C9-106? class B: no state change).
		{name: "PSN ahead of the window", pkts: func(r *rig) []pkt {
			return []pkt{{op: wire.OpRCSendOnly, psn: 1000, payload: ones(8)}, {op: wire.OpRCSendOnly, psn: 5000, payload: ones(8)}}
		}, want: []string{nak(0, "PSN sequence error")}, counter: counter(nic.CounterOutOfSeqRequest), state: nic.QPStateRTS},
		// psn_compare is a 24-bit signed difference: a PSN more than 2^23
		// ahead is behind, a duplicate (rxe duplicate_request, C9-105):
		// a SEND is re-acknowledged with ePSN-1 and not delivered.
		{name: "PSN half the space ahead (a duplicate)", pkts: func(r *rig) []pkt {
			return []pkt{{op: wire.OpRCSendOnly, psn: 1 << 23, payload: ones(8)}}
		}, want: []string{fmt.Sprintf("RC_ACKNOWLEDGE psn=%d ACK", rigRQPSN-1)},
			counter: counter(nic.CounterDuplicateRequest), state: nic.QPStateRTS},
		// A duplicate READ no responder resource holds: dropped (rxe
		// duplicate_request: "Resource not found. Class D error").
		{name: "duplicate READ without a resource", pkts: func(r *rig) []pkt {
			return []pkt{{op: wire.OpRCReadRequest, psn: 1<<24 - 5, reth: wire.RETHFields{VA: rw(r, 0), RKey: r.rw.RKey, DMALength: 8}}}
		}, counter: counter(nic.CounterDuplicateRequest), state: nic.QPStateRTS},
		// rxe check_rkey → mr_check_range fails → RESPST_ERR_RKEY_VIOLATION:
		// NAK remote access error (class C), responder QP to ERR
		// (IBTA §9.7.5.1.3 C9-88?, Table 44 R_Key violation).
		{name: "RETH length beyond the MR", pkts: func(r *rig) []pkt {
			return []pkt{{op: wire.OpRCWriteOnly, reth: wire.RETHFields{VA: rw(r, 4000), RKey: r.rw.RKey, DMALength: 200}, payload: ones(200)}}
		}, want: []string{nak(0, "remote access error")}, counter: counter(nic.CounterRcvdPkts),
			state: nic.QPStateErr},
		// rxe check_op_seq: MIDDLE with no message in progress →
		// RESPST_ERR_MISSING_OPCODE_FIRST: NAK invalid request (class C),
		// QP to ERR (IBTA §9.7.5.1.5, C9-93?).
		{name: "SEND_MIDDLE with no FIRST", pkts: func(r *rig) []pkt {
			return []pkt{{op: wire.OpRCSendMiddle, payload: ones(1024)}}
		}, want: []string{nak(0, "invalid request")}, counter: counter(nic.CounterRcvdPkts),
			state: nic.QPStateErr},
		{name: "RDMA_WRITE_LAST out of place", pkts: func(r *rig) []pkt {
			return []pkt{{op: wire.OpRCWriteLast, payload: ones(8)}}
		}, want: []string{nak(0, "invalid request")}, counter: counter(nic.CounterRcvdPkts),
			state: nic.QPStateErr},
		// rxe check_op_seq: SEND_FIRST then anything but MIDDLE/LAST →
		// RESPST_ERR_MISSING_OPCODE_LAST_C: NAK invalid request.
		{name: "SEND_FIRST then SEND_ONLY", pkts: func(r *rig) []pkt {
			return []pkt{{op: wire.OpRCSendFirst, payload: ones(1024), noAck: true}, {op: wire.OpRCSendOnly, psn: 1, payload: ones(8)}}
		}, landed: func(r *rig) { r.landed(r.recv, 0, ones(1024)) }, want: []string{nak(1, "invalid request")}, counter: counter(nic.CounterRcvdPkts), n: 2,
			state: nic.QPStateErr},
		{name: "WRITE_FIRST then SEND_LAST", pkts: func(r *rig) []pkt {
			return []pkt{{op: wire.OpRCWriteFirst, reth: wire.RETHFields{VA: rw(r, 0), RKey: r.rw.RKey, DMALength: 2048}, payload: ones(1024), noAck: true},
				{op: wire.OpRCSendLast, psn: 1, payload: ones(8)}}
		}, landed: func(r *rig) { r.landed(r.rw, 0, ones(1024)) }, want: []string{nak(1, "invalid request")}, counter: counter(nic.CounterRcvdPkts), n: 2,
			state: nic.QPStateErr},
		// rxe check_length: a FIRST shorter than the path MTU → RESPST_ERR_LENGTH,
		// NAK invalid request.
		{name: "SEND_FIRST shorter than the MTU", pkts: func(r *rig) []pkt {
			return []pkt{{op: wire.OpRCSendFirst, payload: ones(100)}}
		}, want: []string{nak(0, "invalid request")}, counter: counter(nic.CounterRcvdPkts),
			state: nic.QPStateErr},
		// Pad count larger than the payload and pad area: the transport
		// length cannot hold it; rxe's rxe_rcv drops on the length check
		// (payload_size < 0); rocesim's decoder reports ErrPad.
		{name: "pad count beyond the payload", pkts: func(r *rig) []pkt {
			return []pkt{{op: wire.OpRCSendOnly, padLie: 3}}
		}, counter: rxErr(wire.CodePad), state: nic.QPStateRTS},
		// A pad count that lies inside the payload: a WRITE_ONLY for 8 bytes
		// carrying 8, whose pad count says 3 (so 5 bytes of payload): rxe
		// check_rkey, pktlen != resid → RESPST_ERR_LENGTH, NAK invalid request.
		{name: "pad count makes the WRITE shorter than its RETH", pkts: func(r *rig) []pkt {
			return []pkt{{op: wire.OpRCWriteOnly, reth: wire.RETHFields{VA: rw(r, 0), RKey: r.rw.RKey, DMALength: 8}, payload: ones(8), padLie: 3}}
		}, want: []string{nak(0, "invalid request")}, counter: counter(nic.CounterRcvdPkts),
			state: nic.QPStateErr},
		// A payload longer than the RETH says: the same length error.
		{name: "WRITE payload beyond its RETH length", pkts: func(r *rig) []pkt {
			return []pkt{{op: wire.OpRCWriteOnly, reth: wire.RETHFields{VA: rw(r, 0), RKey: r.rw.RKey, DMALength: 4}, payload: ones(8)}}
		}, want: []string{nak(0, "invalid request")}, counter: counter(nic.CounterRcvdPkts),
			state: nic.QPStateErr},
		// A zero-length WRITE carrying data: rxe skips check_rkey for a
		// zero DMA length (C9-88) and would then copy through no MR;
		// rocesim refuses it as a length error.
		{name: "zero-length WRITE carrying data", pkts: func(r *rig) []pkt {
			return []pkt{{op: wire.OpRCWriteOnly, reth: wire.RETHFields{VA: rw(r, 0), RKey: 0xBAD, DMALength: 0}, payload: ones(4)}}
		}, want: []string{nak(0, "invalid request")}, counter: counter(nic.CounterRcvdPkts),
			state: nic.QPStateErr},
		// rxe check_keys: the Q_Key differs → drop, port qkey_viol_cntr
		// (IBTA §9.6.1.2 C9-49?: silently dropped).
		{name: "UD with the wrong Q_Key", pkts: func(r *rig) []pkt {
			return []pkt{{op: wire.OpUDSendOnly, qpn: r.ud.Num(), qkey: 0x22222222, payload: ones(8)}}
		}, counter: drop(nic.DropQKey), state: nic.QPStateRTS},
		// rxe check_keys: pkey_match(pkey, 0xFFFF) fails → drop, port
		// bad_pkey_cntr (IBTA §9.6.1.1 C9-42?, §10.9.3).
		{name: "P_Key of another partition", pkts: func(r *rig) []pkt {
			return []pkt{{op: wire.OpRCSendOnly, pkey: 0x8123, payload: ones(8)}}
		}, counter: drop(nic.DropPKey), state: nic.QPStateRTS},
		{name: "P_Key 0x0000 (invalid)", pkts: func(r *rig) []pkt {
			return []pkt{{op: wire.OpRCSendOnly, pkey: 0x8000, payload: ones(8)}}
		}, counter: drop(nic.DropPKey), state: nic.QPStateRTS},
		// A limited member of the default partition (0x7FFF) matches the
		// port's full membership: accepted (pkey_match).
		{name: "P_Key 0x7FFF (limited member) is accepted", pkts: func(r *rig) []pkt {
			return []pkt{{op: wire.OpRCWriteOnly, pkey: 0x7FFF, reth: wire.RETHFields{VA: rw(r, 0), RKey: 0xBAD, DMALength: 0}}}
		}, want: []string{fmt.Sprintf("RC_ACKNOWLEDGE psn=%d ACK", rigRQPSN)}, counter: counter(nic.CounterRcvdPkts), state: nic.QPStateRTS},
		// rxe check_op_valid: READ on a QP whose qp_access_flags lack
		// REMOTE_READ → RESPST_ERR_UNSUPPORTED_OPCODE: NAK invalid request
		// (class C), QP to ERR.
		{name: "READ on a QP without REMOTE_READ", opts: rigOptions{rcAccess: nic.AccessRemoteWrite},
			pkts: func(r *rig) []pkt {
				return []pkt{{op: wire.OpRCReadRequest, reth: wire.RETHFields{VA: rw(r, 0), RKey: r.rw.RKey, DMALength: 8}}}
			}, want: []string{nak(0, "invalid request")}, counter: counter(nic.CounterRcvdPkts),
			state: nic.QPStateErr},
		// rxe atomic_reply: a misaligned address (R_Key and range good) →
		// RESPST_ERR_MISALIGNED_ATOMIC: NAK invalid request (class C), QP to
		// ERR. (post_send refuses one; this is a peer that does not.)
		{name: "misaligned atomic", pkts: func(r *rig) []pkt {
			return []pkt{{op: wire.OpRCFetchAdd, atomic: wire.AtomicETHFields{VA: rw(r, 4), RKey: r.rw.RKey, SwapAddData: 1}}}
		}, want: []string{nak(0, "invalid request")}, counter: counter(nic.CounterRcvdPkts),
			state: nic.QPStateErr},
		// rxe check_rkey → lookup_mr: the MR lacks REMOTE_ATOMIC →
		// RESPST_ERR_RKEY_VIOLATION: NAK remote access error.
		{name: "atomic on an MR without REMOTE_ATOMIC", pkts: func(r *rig) []pkt {
			return []pkt{{op: wire.OpRCCompareSwap, atomic: wire.AtomicETHFields{VA: r.ro.Addr, RKey: r.ro.RKey, SwapAddData: 1}}}
		}, want: []string{nak(0, "remote access error")}, counter: counter(nic.CounterRcvdPkts),
			state: nic.QPStateErr},
		// UC: an R_Key violation drops the message silently, the QP stays
		// in RTS (rxe RESPST_ERR_RKEY_VIOLATION for UC without SRQ: class E,
		// cleanup; no ACKs exist on UC). Its LAST is dropped with it.
		{name: "UC WRITE with a bad R_Key", pkts: func(r *rig) []pkt {
			return []pkt{{op: wire.OpUCWriteFirst, qpn: r.uc.Num(), reth: wire.RETHFields{VA: r.local.Addr, RKey: r.local.RKey, DMALength: 1100}, payload: ones(1024)},
				{op: wire.OpUCWriteLast, qpn: r.uc.Num(), psn: 1, payload: ones(76)}}
		}, counter: counter(nic.CounterRcvdPkts), n: 2, state: nic.QPStateRTS},
		// rxe check_type_state: a request for a QP whose responder is not
		// ready (RESET, INIT) → drop (IBTA §10.3.1: a QP in RESET or INIT
		// does not process incoming packets).
		{name: "frame for a QP in RESET", pkts: func(r *rig) []pkt {
			return []pkt{{op: wire.OpRCSendOnly, qpn: r.resetQP.Num(), payload: ones(8)}}
		}, counter: drop(nic.DropQPState), state: nic.QPStateRTS},
		{name: "frame for a QP in INIT", pkts: func(r *rig) []pkt {
			return []pkt{{op: wire.OpRCWriteOnly, qpn: r.initQP.Num(), reth: wire.RETHFields{VA: rw(r, 0), RKey: r.rw.RKey, DMALength: 8}, payload: ones(8)}}
		}, counter: drop(nic.DropQPState), state: nic.QPStateRTS},
		// rxe check_type_state: a UC opcode to an RC QP → drop.
		{name: "UC opcode to the RC QP", pkts: func(r *rig) []pkt {
			return []pkt{{op: wire.OpUCSendOnly, payload: ones(8)}}
		}, counter: drop(nic.DropQPType), state: nic.QPStateRTS},
		// An ACK the requester never asked for: counted, ignored (rxe
		// check_psn in the completer: nothing outstanding).
		{name: "unsolicited ACK", pkts: func(r *rig) []pkt {
			return []pkt{{op: wire.OpRCAcknowledge, psn: 4000}}
		}, counter: counter(nic.CounterRcvdPkts), state: nic.QPStateRTS},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			r := newRig(t, row.opts)
			for _, p := range row.pkts(r) {
				r.dev.Receive(0, r.frame(t, p))
			}
			assert.Equal(t, row.want, r.responses(t), "frames sent")
			n := row.n
			if n == 0 {
				n = 1
			}
			assert.Equal(t, n, row.counter.get(r), row.counter.name)
			assert.Equal(t, row.state, r.rc.State(), "RC QP state")
			assert.Equal(t, nic.QPStateRTS, r.uc.State(), "UC QP state")
			// rxe 6.1 raises no QP event for a responder error (the IBTA
			// would raise QP_REQ_ERR or QP_ACCESS_ERR; the spec profile
			// does, see TestRemoteAccessError in package verbs).
			assert.Equal(t, "[]", r.events(), "async events")
			if row.landed != nil {
				row.landed(r)
			}
			assert.Empty(t, r.memoryChanged(), "MRs changed")
			assert.Equal(t, nic.QPStateInit, r.initQP.State())
			assert.Equal(t, nic.QPStateReset, r.resetQP.State())
		})
	}
}

package realnet

import (
	"context"
	"fmt"
	"net/netip"

	"github.com/rocesim/rocesim/nic"
	"github.com/rocesim/rocesim/sim"
	"github.com/rocesim/rocesim/wire"
)

// NodeConfig describes a model node on the UDP transport.
type NodeConfig struct {
	// Name names the node in device notes.
	Name string
	// Addr is the node's IPv4 or IPv6 address (its GID); it binds
	// Addr:4791.
	Addr netip.Addr
	// PathMTUMax is the largest path MTU (0: MTU4096; loopback's MTU
	// carries it).
	PathMTUMax nic.MTU
	// Profile is the NIC behaviour profile (rxe by default).
	Profile nic.Profile
	// Annotate gives every frame a note (for a capture).
	Annotate bool
	// RecoverIPv4ID: see UDPConfig.
	RecoverIPv4ID bool
	// Transport, if set, carries the node's frames instead of a UDP
	// transport on Addr:4791 (an in-memory double in tests); the node's
	// driver closes it.
	Transport Transport
	// Sent is the driver's Sent hook (a capture of what the node sent).
	Sent func(now sim.Time, frame []byte, note string, err error)
	// PeerAddr, if valid, is where the node reaches its workload peer's
	// QP (RunClient, RunServer), whatever address the peer announces: a
	// stand-in of the peer on a rocesim switch between the two.
	PeerAddr netip.Addr
}

// Node is a nic.Device on the UDP transport, run by a Driver: a RoCE v2
// endpoint at Addr:4791 on the machine's network.
type Node struct {
	*Driver
	// Addr is the node's IPv4 or IPv6 address.
	Addr netip.Addr
	// PeerAddr: see NodeConfig.PeerAddr.
	PeerAddr netip.Addr
	mtu      nic.MTU
}

// NewNode binds Addr:4791 (unless cfg.Transport is set) and starts the
// node's driver.
func NewNode(cfg NodeConfig) (*Node, error) {
	if cfg.PathMTUMax == 0 {
		cfg.PathMTUMax = nic.MTU4096
	}
	mac := StandInMAC(cfg.Addr)
	tr := cfg.Transport
	if tr == nil {
		u, err := NewUDP(UDPConfig{Addr: netip.AddrPortFrom(cfg.Addr, 0), MAC: mac, RecoverIPv4ID: cfg.RecoverIPv4ID})
		if err != nil {
			return nil, err
		}
		tr = u
	}
	dc := nic.Config{Name: "rxe0", Node: cfg.Name, MAC: mac, Profile: cfg.Profile, PathMTUMax: cfg.PathMTUMax,
		AddrBase: nic.DefaultAddrBase + uint64(mac[5])<<32, Annotate: cfg.Annotate}
	if cfg.Addr.Is6() {
		dc.IPv6 = cfg.Addr
	} else {
		dc.IPv4 = cfg.Addr
	}
	dev := nic.New(dc)
	d, err := Start(Config{Device: dev, Transport: tr, Sent: cfg.Sent})
	if err != nil {
		tr.Close()
		return nil, err
	}
	return &Node{Driver: d, Addr: cfg.Addr, PeerAddr: cfg.PeerAddr, mtu: cfg.PathMTUMax}, nil
}

// Endpoint is what two RC QPs exchange out of band before they connect
// (what ibv_rc_pingpong sends over TCP): the address, the QP number, the
// first PSN, and the memory region the peer may read and write.
type Endpoint struct {
	Addr netip.Addr
	QPN  uint32
	PSN  uint32
	VA   uint64
	RKey uint32
}

// RC is an RC QP on a node with its memory region and CQ (one CQ for
// both queues). Its methods reach the device through the node's Do.
type RC struct {
	n   *Node
	pd  *nic.PD
	mr  *nic.MR
	cq  *nic.CQ
	qp  *nic.QP
	mw  *nic.MW // BindMW's window, allocated on its first call
	psn uint32
}

// rcAccess is every remote access right and local write, for the MR and
// the QP; the MR also allows memory windows (BindMW).
const rcAccess = nic.AccessLocalWrite | nic.AccessRemoteWrite | nic.AccessRemoteRead | nic.AccessRemoteAtomic

// NewRC creates a PD, an MR of mrLen bytes filled by fill (nil: zeros),
// a CQ and an RC QP whose first PSN is psn.
func (n *Node) NewRC(mrLen int, fill func([]byte), psn uint32) (*RC, error) {
	r := &RC{n: n, psn: psn & 0xFFFFFF}
	err := n.Do(func(now sim.Time, dev *nic.Device) error {
		var err error
		if r.pd, err = dev.AllocPD(); err != nil {
			return err
		}
		buf := make([]byte, mrLen)
		if fill != nil {
			fill(buf)
		}
		if r.mr, err = dev.RegMR(r.pd, buf, rcAccess|nic.AccessMWBind); err != nil {
			return err
		}
		if r.cq, err = dev.CreateCQ(256, nil, 0); err != nil {
			return err
		}
		r.qp, err = dev.CreateQP(r.pd, nic.QPInitAttr{SendCQ: r.cq, RecvCQ: r.cq, Type: nic.QPTypeRC,
			Cap: nic.QPCap{MaxSendWR: 64, MaxRecvWR: 64, MaxSendSGE: 1, MaxRecvSGE: 1}})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("realnet: node %s: %w", n.Addr, err)
	}
	return r, nil
}

// Local is what the peer needs to connect to r.
func (r *RC) Local() Endpoint {
	return Endpoint{Addr: r.n.Addr, QPN: r.qp.Num(), PSN: r.psn, VA: r.mr.Addr, RKey: r.mr.RKey}
}

// MR is the QP's memory region (read its Bytes only inside the node's Do).
func (r *RC) MR() *nic.MR { return r.mr }

// Connect lists the peer's address with the device and takes the QP
// through INIT, RTR and RTS to the peer's, with the attributes
// ibv_rc_pingpong's peers use (timeout 14, retry_cnt 7, rnr_retry 7).
func (r *RC) Connect(peer Endpoint) error {
	mtu := r.n.mtu
	steps := []struct {
		attr nic.QPAttr
		mask nic.QPAttrMask
	}{
		{nic.QPAttr{QPState: nic.QPStateInit, PKeyIndex: 0, PortNum: 1, QPAccessFlags: rcAccess},
			nic.QPAttrState | nic.QPAttrPKeyIndex | nic.QPAttrPort | nic.QPAttrAccessFlags},
		{nic.QPAttr{QPState: nic.QPStateRTR, PathMTU: mtu, DestQPNum: peer.QPN, RQPSN: peer.PSN,
			AHAttr: nic.AHAttr{IsGlobal: true, PortNum: 1,
				GRH: nic.GRH{DGID: netip.AddrFrom16(peer.Addr.As16()), HopLimit: 64}},
			MaxDestRdAtomic: 16, MinRNRTimer: 12},
			nic.QPAttrState | nic.QPAttrAV | nic.QPAttrPathMTU | nic.QPAttrDestQPN | nic.QPAttrRQPSN |
				nic.QPAttrMaxDestRdAtomic | nic.QPAttrMinRNRTimer},
		{nic.QPAttr{QPState: nic.QPStateRTS, SQPSN: r.psn, Timeout: 14, RetryCnt: 7, RNRRetry: 7, MaxRdAtomic: 16},
			nic.QPAttrState | nic.QPAttrSQPSN | nic.QPAttrTimeout | nic.QPAttrRetryCnt | nic.QPAttrRNRRetry |
				nic.QPAttrMaxQPRdAtomic},
	}
	return r.n.Do(func(now sim.Time, dev *nic.Device) error {
		dev.AddNeighbour(netip.AddrFrom16(peer.Addr.As16()), StandInMAC(peer.Addr))
		for _, s := range steps {
			if err := dev.ModifyQP(now, r.qp, &s.attr, s.mask); err != nil {
				return fmt.Errorf("realnet: modify_qp to %s: %w", s.attr.QPState, err)
			}
		}
		return nil
	})
}

// Post posts one signaled send work request of length bytes at off in
// the QP's MR (length 0: no SGE, a zero-length message, since an SGE of
// length 0 means 2^31 bytes); wr.RemoteAddr is the peer's absolute
// address (the peer's VA plus an offset, added by the caller).
func (r *RC) Post(wr nic.SendWR, off, length int) error {
	wr.Flags |= nic.SendSignaled
	wr.SGList = r.sge(off, length)
	return r.n.Do(func(now sim.Time, dev *nic.Device) error {
		_, err := dev.PostSend(now, r.qp, []nic.SendWR{wr})
		return err
	})
}

// PostRecv posts one receive of length bytes at off in the QP's MR
// (length 0: no SGE, as Post).
func (r *RC) PostRecv(wrid uint64, off, length int) error {
	wr := nic.RecvWR{WRID: wrid, SGList: r.sge(off, length)}
	return r.n.Do(func(now sim.Time, dev *nic.Device) error {
		_, err := dev.PostRecv(now, r.qp, []nic.RecvWR{wr})
		return err
	})
}

// sge is the scatter/gather list of length bytes at off in the QP's MR:
// none for length 0 (an SGE of length 0 means 2^31 bytes, IBTA 10.7.2.2
// as rxe reads it).
func (r *RC) sge(off, length int) []nic.SGE {
	if length == 0 {
		return nil
	}
	return []nic.SGE{{Addr: r.mr.Addr + uint64(off), Length: uint32(length), LKey: r.mr.LKey}}
}

// BindMW binds a type 2 memory window over [off, off+length) of the QP's
// MR with remote write and read access, by posting a signaled
// IBV_WR_BIND_MW with the next R_Key (ibv_inc_rkey), and returns that
// R_Key: the one a peer's SEND WITH INVALIDATE names. The window is
// allocated on the first call; a later call binds it again, which
// succeeds only once it was invalidated (a type 2 window is bound once,
// o10-37.2.30). The bind's completion is the QP's next.
func (r *RC) BindMW(wrid uint64, off, length int) (uint32, error) {
	var rkey uint32
	err := r.n.Do(func(now sim.Time, dev *nic.Device) error {
		if r.mw == nil {
			w, err := dev.AllocMW(r.pd, nic.MWType2)
			if err != nil {
				return err
			}
			r.mw = w
		}
		rkey = nic.IncRKey(r.mw.RKey)
		wr := nic.SendWR{WRID: wrid, Opcode: nic.WRBindMW, Flags: nic.SendSignaled, BindMW: nic.BindMW{MW: r.mw, RKey: rkey,
			BindInfo: nic.BindInfo{MR: r.mr, Addr: r.mr.Addr + uint64(off), Length: uint64(length),
				Access: nic.AccessRemoteWrite | nic.AccessRemoteRead}}}
		if _, err := dev.PostSend(now, r.qp, []nic.SendWR{wr}); err != nil {
			return err
		}
		// As the user of the C verb does: the window's key is the new
		// one once the bind is posted.
		r.mw.RKey = rkey
		return nil
	})
	return rkey, err
}

// Wait returns the QP's next completion, waiting for it in real time.
func (r *RC) Wait(ctx context.Context) (nic.WC, error) {
	var wc [1]nic.WC
	err := r.n.Await(ctx, func(now sim.Time, dev *nic.Device) bool { return r.cq.Poll(wc[:]) == 1 })
	return wc[0], err
}

// Bytes returns a copy of the MR's bytes [off, off+length).
func (r *RC) Bytes(off, length int) ([]byte, error) {
	var b []byte
	err := r.n.Do(func(sim.Time, *nic.Device) error {
		b = append(b, r.mr.Bytes()[off:off+length]...)
		return nil
	})
	return b, err
}

// RxErrors is the number of frames the node's device dropped as
// malformed, all codes together.
func (n *Node) RxErrors() (uint64, error) {
	var sum uint64
	err := n.Do(func(now sim.Time, dev *nic.Device) error {
		for c := range wire.NumErrorCodes {
			sum += dev.RxErrors(wire.ErrorCode(c))
		}
		return nil
	})
	return sum, err
}

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
	mr  *nic.MR
	cq  *nic.CQ
	qp  *nic.QP
	psn uint32
}

// rcAccess is every access right, for the MR and the QP.
const rcAccess = nic.AccessLocalWrite | nic.AccessRemoteWrite | nic.AccessRemoteRead | nic.AccessRemoteAtomic

// NewRC creates a PD, an MR of mrLen bytes filled by fill (nil: zeros),
// a CQ and an RC QP whose first PSN is psn.
func (n *Node) NewRC(mrLen int, fill func([]byte), psn uint32) (*RC, error) {
	r := &RC{n: n, psn: psn & 0xFFFFFF}
	err := n.Do(func(now sim.Time, dev *nic.Device) error {
		pd, err := dev.AllocPD()
		if err != nil {
			return err
		}
		buf := make([]byte, mrLen)
		if fill != nil {
			fill(buf)
		}
		if r.mr, err = dev.RegMR(pd, buf, rcAccess); err != nil {
			return err
		}
		if r.cq, err = dev.CreateCQ(256, nil, 0); err != nil {
			return err
		}
		r.qp, err = dev.CreateQP(pd, nic.QPInitAttr{SendCQ: r.cq, RecvCQ: r.cq, Type: nic.QPTypeRC,
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

// Post posts one signaled send work request; its SGE addresses are
// offsets in the QP's MR, its RemoteAddr an offset in the peer's (peer's
// VA added by the caller).
func (r *RC) Post(wr nic.SendWR, off, length int) error {
	wr.Flags |= nic.SendSignaled
	wr.SGList = []nic.SGE{{Addr: r.mr.Addr + uint64(off), Length: uint32(length), LKey: r.mr.LKey}}
	return r.n.Do(func(now sim.Time, dev *nic.Device) error {
		_, err := dev.PostSend(now, r.qp, []nic.SendWR{wr})
		return err
	})
}

// PostRecv posts one receive of length bytes at off in the QP's MR.
func (r *RC) PostRecv(wrid uint64, off, length int) error {
	return r.n.Do(func(now sim.Time, dev *nic.Device) error {
		_, err := dev.PostRecv(now, r.qp, []nic.RecvWR{{WRID: wrid,
			SGList: []nic.SGE{{Addr: r.mr.Addr + uint64(off), Length: uint32(length), LKey: r.mr.LKey}}}})
		return err
	})
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

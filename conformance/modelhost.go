package conformance

// Flow through a model host: the device runs on a realnet.Driver over a
// realnet.Dgram transport (one Ethernet frame per UDP datagram on
// 127.0.0.1, QEMU -netdev dgram), whose loop goroutine calls the host's
// hooks:
//   1. input, per frame from the VM, at the device's time (wall-clock
//      nanoseconds since NewModelHost):
//      ARP (RFC 826): a request or reply from PeerIP teaches us the
//      peer's MAC; so does any IPv4 frame from PeerIP. A newly learnt MAC
//      goes into the device's neighbour table under the peer's RoCE v2
//      GID. IPv4 UDP to port 4791 goes to dev.Receive; anything else is
//      counted as ignored. The frame is captured on the receive
//      interface, its comment saying what the host made of it (the MAC
//      learnt, a drop as malformed). Then an ARP request for our IP is
//      answered with our MAC, so the capture shows the request before the
//      reply.
//   2. output, per frame the device hands out (the driver's loop over
//      dev.Ready, nic/ready.go): the FlipICRC fault, then the capture on
//      the send interface, so the capture shows the wire; sent counts
//      what the socket took. The driver tells the device TxDone for each
//      frame once the batch is out and arms its timer for the batch's
//      Deadline, so ACK timeouts and RNR waits fire in real time.
// Do runs a caller's function on the driver's loop; Resolve sends its
// ARP requests through Do.

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"sync"
	"time"

	"github.com/rocesim/rocesim/nic"
	"github.com/rocesim/rocesim/realnet"
	"github.com/rocesim/rocesim/sim"
	"github.com/rocesim/rocesim/wire"
	"github.com/rocesim/rocesim/wire/capture"
)

// ModelHostConfig describes a model host: rocesim's NIC model as the
// host at one end of a VM's Ethernet link.
type ModelHostConfig struct {
	// Name is the host's node name in captures and device notes
	// (default "model").
	Name string
	// IP is the IPv4 address the host owns, e.g. "10.0.0.2" (a /24).
	IP string
	// MAC is the host's Ethernet address; zero means 02:00:00:ip[1]:ip[2]:ip[3].
	MAC wire.MAC
	// PeerIP is the VM's IPv4 address; Resolve ARPs for it.
	PeerIP string
	// Port is the UDP port on 127.0.0.1 the host listens on (0: pick a
	// free one): the VM's VMConfig.RemotePort.
	Port int
	// PeerPort is the UDP port on 127.0.0.1 the VM listens on (its
	// VMConfig.LocalPort), where the host sends its frames.
	PeerPort int
	// Profile is the NIC behaviour profile (rxe by default).
	Profile nic.Profile
	// CapturePath, if set, receives every frame sent and received, ARP
	// included (pcapng when the name ends in .pcapng). Timestamps are the
	// device's time: wall-clock nanoseconds since NewModelHost (the
	// section comment gives the wall-clock start). Interface 0 holds the
	// frames the host sent ("<name>->peer"), interface 1 the frames it
	// received ("peer-><name>"); sent frames carry the device's notes as
	// comments, received frames what the host did with them.
	CapturePath string
	// FlipICRC makes a deliberately wrong model, for tests: one ICRC bit
	// of every RoCE v2 frame sent is flipped, before the frame is
	// captured, so the capture shows what went on the wire.
	FlipICRC bool
}

// ModelHostStats counts what a model host did.
type ModelHostStats struct {
	FramesIn    uint64 // datagrams received
	FramesOut   uint64 // datagrams sent (ARP and RoCE v2)
	ARPAnswered uint64 // ARP requests for our IP answered
	ARPSent     uint64 // ARP requests sent by Resolve
	RoCEIn      uint64 // IPv4 UDP 4791 frames handed to the device
	RoCEOut     uint64 // RoCE v2 frames the device sent
	Ignored     uint64 // frames neither ARP nor RoCE v2 over IPv4 (IPv6, ICMP, TCP, ...)
	Malformed   uint64 // RoCE v2 frames the device dropped as malformed (sum of dev.RxErrors)
	SendErrors  uint64 // datagrams the socket refused (the device still got its TxDone)
}

// ErrModelHostClosed is returned by Do and Resolve once the host is closed.
var ErrModelHostClosed = errors.New("conformance: model host is closed")

// ModelHost is rocesim's NIC model (a nic.Device) attached in real time to
// a QEMU VM's Ethernet link, where each frame is one UDP datagram on
// 127.0.0.1 (QEMU -netdev dgram), so real rxe in the VM can do RDMA with
// the model. It answers ARP for its address and learns the VM's MAC from
// ARP or its IPv4 frames.
//
// The device is not safe for concurrent use: one loop goroutine owns it,
// and a caller reaches it only through Do. The device addresses its
// frames with its neighbour table alone, so before the model sends a
// request of its own (a SEND, WRITE, READ or atomic), the caller must
// call Resolve: a frame built before the peer's MAC is known goes out to
// 00:00:00:00:00:00 and the VM drops it. Answers to the VM's requests
// need nothing: the VM's frame teaches its MAC before the device sees
// it. The other methods are safe for concurrent use.
type ModelHost struct {
	cfg      ModelHostConfig
	ip       netip.Addr
	peerIP   netip.Addr
	mac      wire.MAC
	start    time.Time
	tr       *realnet.Dgram
	d        *realnet.Driver
	resolved chan struct{} // closed when the peer's MAC is known

	// Owned by the driver's loop goroutine.
	dev      *nic.Device
	capw     capture.Writer
	txIface  int
	rxIface  int
	peerMAC  wire.MAC
	known    bool
	arp      [arpFrameLen]byte
	pkt      wire.Packet                // FlipICRC's view of the frame sent
	now      sim.Time                   // the time of the input being handled
	rxErrors [wire.NumErrorCodes]uint64 // dev.RxErrors after the last input
	reply    arpAnswer                  // an ARP reply to send after the request is captured

	mu     sync.Mutex // guards stats, capErr
	stats  ModelHostStats
	capErr error
}

// arpAnswer is an ARP reply owed to mac at ip.
type arpAnswer struct {
	due bool
	mac wire.MAC
	ip  netip.Addr
}

// ARP over Ethernet for IPv4 (RFC 826).
const (
	etherTypeARP = 0x0806
	arpLen       = 28 // htype, ptype, hlen, plen, oper, sha, spa, tha, tpa
	arpFrameLen  = wire.EthernetLen + arpLen
	arpRequest   = 1
	arpReply     = 2
)

// resolveInterval is Resolve's ARP request period.
const resolveInterval = 200 * time.Millisecond

// NewModelHost opens the host's port and starts its loop.
func NewModelHost(cfg ModelHostConfig) (*ModelHost, error) {
	if cfg.Name == "" {
		cfg.Name = "model"
	}
	ip, err := netip.ParseAddr(cfg.IP)
	if err != nil || !ip.Is4() {
		return nil, fmt.Errorf("conformance: model host %s: IP %q is not an IPv4 address", cfg.Name, cfg.IP)
	}
	peerIP, err := netip.ParseAddr(cfg.PeerIP)
	if err != nil || !peerIP.Is4() {
		return nil, fmt.Errorf("conformance: model host %s: PeerIP %q is not an IPv4 address", cfg.Name, cfg.PeerIP)
	}
	if cfg.PeerPort <= 0 || cfg.PeerPort > 0xFFFF {
		return nil, fmt.Errorf("conformance: model host %s: PeerPort %d is not a UDP port (the VM's LocalPort)", cfg.Name, cfg.PeerPort)
	}
	mac := cfg.MAC
	if mac == (wire.MAC{}) {
		a := ip.As4()
		mac = wire.MAC{0x02, 0, 0, a[1], a[2], a[3]}
	}
	h := &ModelHost{cfg: cfg, ip: ip, peerIP: peerIP, mac: mac, resolved: make(chan struct{})}
	lo := netip.AddrFrom4([4]byte{127, 0, 0, 1})
	h.tr, err = realnet.NewDgram(realnet.DgramConfig{Local: netip.AddrPortFrom(lo, uint16(cfg.Port)),
		Peer: netip.AddrPortFrom(lo, uint16(cfg.PeerPort))})
	if err != nil {
		return nil, fmt.Errorf("conformance: model host %s: port %d: %w", cfg.Name, cfg.Port, err)
	}
	a := ip.As4()
	h.dev = nic.New(nic.Config{Name: "rxe0", Node: cfg.Name, MAC: mac, IPv4: ip, Profile: cfg.Profile,
		// A 1500-byte Ethernet link, as the VM's rxe has.
		PathMTUMax: nic.MTU1024,
		AddrBase:   nic.DefaultAddrBase + uint64(a[3])<<32,
		Annotate:   true})
	h.start = time.Now()
	if cfg.CapturePath != "" {
		if err := h.openCapture(); err != nil {
			h.tr.Close()
			return nil, err
		}
	}
	h.d, err = realnet.Start(realnet.Config{Device: h.dev, Transport: h.tr, Epoch: h.start,
		Input: h.input, Output: h.output, Sent: h.sent})
	if err != nil {
		h.tr.Close()
		if h.capw != nil {
			h.capw.Close()
		}
		return nil, fmt.Errorf("conformance: model host %s: %w", cfg.Name, err)
	}
	return h, nil
}

// openCapture creates the capture file with one interface per direction.
func (h *ModelHost) openCapture() error {
	w, err := capture.Create(h.cfg.CapturePath, capture.PcapngOptions{Comment: fmt.Sprintf(
		"rocesim model host %s (%s, %s, profile %s) on 127.0.0.1:%d, peer %s on 127.0.0.1:%d; "+
			"timestamps are nanoseconds since %s",
		h.cfg.Name, h.ip, h.mac, h.cfg.Profile, h.Port(), h.peerIP, h.cfg.PeerPort,
		h.start.UTC().Format(time.RFC3339Nano))})
	if err != nil {
		return fmt.Errorf("conformance: model host %s: capture: %w", h.cfg.Name, err)
	}
	if h.txIface, err = w.AddInterface(h.cfg.Name+"->peer",
		fmt.Sprintf("model host %s (%s) to %s", h.cfg.Name, h.ip, h.peerIP)); err == nil {
		h.rxIface, err = w.AddInterface("peer->"+h.cfg.Name,
			fmt.Sprintf("%s to model host %s (%s)", h.peerIP, h.cfg.Name, h.ip))
	}
	if err != nil {
		w.Close()
		return fmt.Errorf("conformance: model host %s: capture: %w", h.cfg.Name, err)
	}
	h.capw = w
	return nil
}

// Port returns the UDP port the host listens on: the VM's
// VMConfig.RemotePort.
func (h *ModelHost) Port() int { return int(h.tr.LocalAddr().Port()) }

// MAC returns the host's Ethernet address.
func (h *ModelHost) MAC() wire.MAC { return h.mac }

// GID returns the host's RoCE v2 GID: its IPv4 address mapped into IPv6
// (::ffff:a.b.c.d), GID index 0 of its device.
func (h *ModelHost) GID() netip.Addr { return netip.AddrFrom16(h.ip.As16()) }

// Stats returns the counters so far.
func (h *ModelHost) Stats() ModelHostStats {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.stats
}

// Do runs f on the host's loop goroutine, which owns the device, with the
// current time; then it runs the device's due timers and sends the frames
// f caused. It returns f's error, or ErrModelHostClosed if the host is
// closed. f must not keep dev, nor call Do (the loop would wait for
// itself); memory registered with the device is the device's too, so
// read it inside f.
func (h *ModelHost) Do(f func(now sim.Time, dev *nic.Device) error) error {
	err := h.d.Do(f)
	if errors.Is(err, realnet.ErrDriverClosed) {
		return ErrModelHostClosed
	}
	return err
}

// Resolve waits until the peer's MAC is known: from an ARP reply, an ARP
// request from the peer, or any IPv4 frame from PeerIP. Meanwhile it
// sends an ARP request for PeerIP every 200 ms. Call it before the model
// sends (see ModelHost).
func (h *ModelHost) Resolve(ctx context.Context) error {
	t := time.NewTicker(resolveInterval)
	defer t.Stop()
	for {
		select {
		case <-h.resolved:
			return nil
		default:
		}
		if err := h.Do(func(now sim.Time, _ *nic.Device) error {
			h.now = now
			h.sendARP(arpRequest, wire.MAC{}, h.peerIP)
			return nil
		}); err != nil {
			return err
		}
		select {
		case <-h.resolved:
			return nil
		case <-t.C:
		case <-h.d.Done():
			return ErrModelHostClosed
		case <-ctx.Done():
			return fmt.Errorf("conformance: model host %s: resolving %s: %w", h.cfg.Name, h.peerIP, ctx.Err())
		}
	}
}

// Close stops the host: the loop ends, the port closes, the capture is
// flushed and closed. It returns the first error of the capture or of a
// socket read. A second Close does nothing.
func (h *ModelHost) Close() error {
	select {
	case <-h.d.Done():
		return nil
	default:
	}
	rerr := h.d.Close()
	if rerr != nil {
		rerr = fmt.Errorf("conformance: model host %s: port %d: %w", h.cfg.Name, h.Port(), rerr)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	err := h.capErr
	if h.capw != nil {
		// The loop has returned: the capture is ours now.
		if cerr := h.capw.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("conformance: model host %s: capture: %w", h.cfg.Name, cerr)
		}
		h.capw = nil
	}
	if err == nil {
		err = rerr
	}
	return err
}

// input handles one frame from the VM (the driver's Input hook).
func (h *ModelHost) input(now sim.Time, frame []byte) {
	h.now = now
	h.count(func(s *ModelHostStats) { s.FramesIn++ })
	comment := ""
	switch {
	case len(frame) < wire.EthernetLen:
		comment = "ignored: shorter than an Ethernet header"
		h.count(func(s *ModelHostStats) { s.Ignored++ })
	case wire.Ethernet(frame).EtherType() == etherTypeARP:
		comment = h.inputARP(frame)
	case wire.Ethernet(frame).EtherType() == wire.EtherTypeIPv4:
		comment = h.inputIPv4(frame)
	default:
		comment = "ignored: not ARP or IPv4"
		h.count(func(s *ModelHostStats) { s.Ignored++ })
	}
	h.record(h.rxIface, frame, comment)
	if h.reply.due {
		h.reply.due = false
		h.sendARP(arpReply, h.reply.mac, h.reply.ip)
	}
}

// inputARP learns the peer's MAC from its requests and replies (RFC
// 826's merge step) and, for a request for our IP, leaves the answer in
// h.reply for input to send once the request is captured. It returns the
// capture comment.
func (h *ModelHost) inputARP(frame []byte) string {
	a := frame[wire.EthernetLen:]
	if len(a) < arpLen || binary.BigEndian.Uint16(a[0:]) != 1 || binary.BigEndian.Uint16(a[2:]) != wire.EtherTypeIPv4 ||
		a[4] != 6 || a[5] != 4 {
		h.count(func(s *ModelHostStats) { s.Ignored++ })
		return "ignored: not ARP for IPv4 over Ethernet"
	}
	op := binary.BigEndian.Uint16(a[6:])
	sha := wire.MAC(a[8:14])
	spa := netip.AddrFrom4([4]byte(a[14:18]))
	tpa := netip.AddrFrom4([4]byte(a[24:28]))
	var comment string
	switch op {
	case arpRequest:
		comment = "ARP request: who has " + tpa.String() + ", tell " + spa.String()
	case arpReply:
		comment = "ARP reply: " + spa.String() + " is at " + sha.String()
	default:
		h.count(func(s *ModelHostStats) { s.Ignored++ })
		return "ignored: ARP operation " + strconv.Itoa(int(op))
	}
	if spa == h.peerIP {
		comment = joinComments(comment, h.learn(sha))
	}
	if op == arpRequest && tpa == h.ip {
		h.reply = arpAnswer{due: true, mac: sha, ip: spa}
		h.count(func(s *ModelHostStats) { s.ARPAnswered++ })
		comment = joinComments(comment, "answered")
	}
	return comment
}

// inputIPv4 hands RoCE v2 to the device and learns the peer's MAC from
// its IPv4 frames; it returns the capture comment.
func (h *ModelHost) inputIPv4(frame []byte) string {
	ip := frame[wire.EthernetLen:]
	if len(ip) < wire.IPv4MinLen {
		h.count(func(s *ModelHostStats) { s.Ignored++ })
		return "ignored: truncated IPv4 header"
	}
	comment := ""
	if wire.IPv4(ip).Src() == h.peerIP {
		comment = h.learn(wire.Ethernet(frame).Src())
	}
	hl := wire.IPv4(ip).HeaderLen()
	if wire.IPv4(ip).Protocol() != wire.ProtocolUDP || hl < wire.IPv4MinLen || len(ip) < hl+wire.UDPLen ||
		wire.UDP(ip[hl:]).DstPort() != wire.UDPPortRoCEv2 {
		h.count(func(s *ModelHostStats) { s.Ignored++ })
		return joinComments(comment, "ignored: not RoCE v2")
	}
	h.count(func(s *ModelHostStats) { s.RoCEIn++ })
	h.dev.Receive(h.now, frame)
	for c := range wire.NumErrorCodes {
		if n := h.dev.RxErrors(wire.ErrorCode(c)); n != h.rxErrors[c] {
			h.rxErrors[c] = n
			h.count(func(s *ModelHostStats) { s.Malformed++ })
			return joinComments(comment, "dropped by the device: "+wire.ErrorCode(c).String())
		}
	}
	return comment
}

// learn records the peer's MAC and gives it to the device under the
// peer's RoCE v2 GID (::ffff:a.b.c.d, as rxe's GID table lists an IPv4
// address); it returns the capture comment.
func (h *ModelHost) learn(mac wire.MAC) string {
	if h.known && mac == h.peerMAC {
		return ""
	}
	first := !h.known
	h.peerMAC, h.known = mac, true
	h.dev.AddNeighbour(netip.AddrFrom16(h.peerIP.As16()), mac)
	if first {
		close(h.resolved)
	}
	return "learnt the peer's MAC"
}

// sendARP sends an ARP request for tpa (broadcast) or a reply to tha at tpa.
func (h *ModelHost) sendARP(op uint16, tha wire.MAC, tpa netip.Addr) {
	f := h.arp[:]
	dst := tha
	if op == arpRequest {
		dst = wire.MAC{0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF}
	}
	copy(f[0:6], dst[:])
	copy(f[6:12], h.mac[:])
	binary.BigEndian.PutUint16(f[12:], etherTypeARP)
	a := f[wire.EthernetLen:]
	binary.BigEndian.PutUint16(a[0:], 1) // Ethernet
	binary.BigEndian.PutUint16(a[2:], wire.EtherTypeIPv4)
	a[4], a[5] = 6, 4
	binary.BigEndian.PutUint16(a[6:], op)
	copy(a[8:14], h.mac[:])
	ip := h.ip.As4()
	copy(a[14:18], ip[:])
	copy(a[18:24], tha[:])
	t := tpa.As4()
	copy(a[24:28], t[:])
	comment := "ARP reply: " + h.ip.String() + " is at " + h.mac.String()
	if op == arpRequest {
		comment = "ARP request: who has " + tpa.String()
		h.count(func(s *ModelHostStats) { s.ARPSent++ })
	}
	h.write(f, comment)
}

// output applies the FlipICRC fault to a frame the device hands out
// (in place: the frame is the driver's until the next batch) and
// captures it (the driver's Output hook).
func (h *ModelHost) output(now sim.Time, frame []byte, note string) ([]byte, string) {
	h.now = now
	h.count(func(s *ModelHostStats) { s.RoCEOut++ })
	if h.cfg.FlipICRC && h.pkt.DecodeHeaders(frame) == nil {
		h.pkt.ICRC[0] ^= 0x01
		note = joinComments(note, "ICRC flipped (FlipICRC)")
	}
	h.record(h.txIface, frame, note)
	return frame, note
}

// sent counts a frame of the device's the socket took or refused (the
// driver's Sent hook; refused, it is dropped at the port and the device
// still gets its TxDone).
func (h *ModelHost) sent(_ sim.Time, _ []byte, _ string, err error) { h.counted(err) }

// write captures a frame of the host's own (ARP) on the send interface
// and sends it to the peer.
func (h *ModelHost) write(frame []byte, comment string) {
	h.record(h.txIface, frame, comment)
	h.counted(h.d.Transmit(frame))
}

// counted counts a datagram sent, or refused by the socket.
func (h *ModelHost) counted(err error) {
	h.count(func(s *ModelHostStats) {
		if err != nil {
			s.SendErrors++
		} else {
			s.FramesOut++
		}
	})
}

// record writes frame to the capture at the device's time.
func (h *ModelHost) record(iface int, frame []byte, comment string) {
	if h.capw == nil {
		return
	}
	if err := h.capw.WriteFrame(int64(h.now), iface, frame, comment); err != nil {
		h.mu.Lock()
		if h.capErr == nil {
			h.capErr = fmt.Errorf("conformance: model host %s: capture: %w", h.cfg.Name, err)
		}
		h.mu.Unlock()
	}
}

// count updates the counters under the lock.
func (h *ModelHost) count(f func(*ModelHostStats)) {
	h.mu.Lock()
	f(&h.stats)
	h.mu.Unlock()
}

// joinComments joins two comments with "; ", either possibly empty.
func joinComments(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return a + "; " + b
}

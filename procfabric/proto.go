package procfabric

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/netip"

	"github.com/rocesim/rocesim/sim"
	"github.com/rocesim/rocesim/sim/fabric"
	"github.com/rocesim/rocesim/wire"
)

// A message's life on the socket:
//
//  1. the sender appends [length][version][type][body] to its buffer
//     (append* below), and writes the buffer in one call;
//  2. the reader reads the 4-byte length, refuses it out of bounds,
//     reads that many bytes into its reused buffer, and checks the
//     version and type;
//  3. parse* reads the body, refusing anything short, long or out of
//     range.

// Version is the protocol version every message carries.
const Version = 4

// MaxMessage bounds a message's length field: the largest frame, the
// largest note and the fixed fields, rounded up.
const MaxMessage = 16 << 10

// MaxNote is the longest frame note a process may send.
const MaxNote = 1024

// MaxNodeName is the longest node name.
const MaxNodeName = 64

// msgType is a message's type byte.
type msgType uint8

// Message types (see the package documentation).
const (
	msgAttach   msgType = 1
	msgAttached msgType = 2
	msgFrame    msgType = 3
	msgWait     msgType = 4
	msgDeliver  msgType = 5
	msgTxDone   msgType = 6
	msgNow      msgType = 7
	msgBye      msgType = 8
	msgDetach   msgType = 9
	msgResume   msgType = 10
	msgNodes    msgType = 11 // the attach reply's further nodes (appendAttached)
	msgWill     msgType = 12 // a key of the process's will, and its frame or none (appendWill)
	msgPollWait msgType = 13 // a wait from a poll that found nothing (Port.PollWait)
	msgPoll     msgType = 14 // the wait in progress is now a poll's (Port.Poll)
	msgTick     msgType = 15 // a resume for the library's own housekeeping, not the program's (Port.Tick)
)

// ErrProtocol is wrapped by every error about a malformed message.
var ErrProtocol = errors.New("procfabric: protocol error")

func protoErr(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrProtocol, fmt.Sprintf(format, args...))
}

// header appends a message header with a placeholder length; finish sets
// it once the body is appended.
func header(b []byte, t msgType) ([]byte, int) {
	at := len(b)
	return append(b, 0, 0, 0, 0, Version, byte(t)), at
}

func finish(b []byte, at int) []byte {
	binary.BigEndian.PutUint32(b[at:], uint32(len(b)-at-4))
	return b
}

func appendTime(b []byte, t msgType, at sim.Time) []byte {
	b, h := header(b, t)
	return finish(binary.BigEndian.AppendUint64(b, uint64(at)), h)
}

// appendWait appends a wait or pollwait: the deadline, the port's
// tx-dones the daemon need not wake the process for (Port.SetTxSlack),
// then the frames it need not wake it for (Port.SetRxSlack), each as
// QPN, PSN, opcode, payload length and count (rxSlackLen bytes).
func appendWait(b []byte, t msgType, deadline sim.Time, slack uint32, rx []wire.PacketRun) []byte {
	b, h := header(b, t)
	b = binary.BigEndian.AppendUint64(b, uint64(deadline))
	b = binary.BigEndian.AppendUint32(b, slack)
	for _, e := range rx {
		b = binary.BigEndian.AppendUint32(b, e.QPN)
		b = binary.BigEndian.AppendUint32(b, uint32(e.PSN))
		b = append(b, byte(e.Opcode))
		b = binary.BigEndian.AppendUint16(b, uint16(e.Len))
		b = binary.BigEndian.AppendUint32(b, uint32(e.Count))
	}
	return finish(b, h)
}

// rxSlackLen is the length of one run of a wait's rx slack.
const rxSlackLen = 15

// parseWait reads a wait or pollwait's body, appending its frame slack
// to rx.
func parseWait(t msgType, body []byte, rx []wire.PacketRun) (sim.Time, uint32, []wire.PacketRun, error) {
	if len(body) < 12 || (len(body)-12)%rxSlackLen != 0 || (len(body)-12)/rxSlackLen > MaxRxSlack {
		return 0, 0, rx, protoErr("message type %d: %d bytes, want 12 and at most %d entries of %d", t, len(body), MaxRxSlack, rxSlackLen)
	}
	at, err := parseTime(t, body[:8])
	if err != nil {
		return 0, 0, rx, err
	}
	for e := body[12:]; len(e) > 0; e = e[rxSlackLen:] {
		psn := binary.BigEndian.Uint32(e[4:])
		if psn > uint32(wire.PSNMask) {
			return 0, 0, rx, protoErr("message type %d: PSN %#x", t, psn)
		}
		rx = append(rx, wire.PacketRun{QPN: binary.BigEndian.Uint32(e), PSN: wire.PSN(psn), Opcode: wire.Opcode(e[8]),
			Len: int(binary.BigEndian.Uint16(e[9:])), Count: int(binary.BigEndian.Uint32(e[11:]))})
	}
	return at, binary.BigEndian.Uint32(body[8:]), rx, nil
}

func appendAttach(b []byte, node string) []byte {
	b, h := header(b, msgAttach)
	return finish(append(b, node...), h)
}

func appendFrame(b, note, frame []byte) []byte {
	b, h := header(b, msgFrame)
	b = binary.BigEndian.AppendUint16(b, uint16(len(note)))
	b = append(b, note...)
	return finish(append(b, frame...), h)
}

// appendWill appends one will message per entry: its key, then the
// noted frame, or nothing to take the key's frame out of the will.
func appendWill(b []byte, entries []WillEntry) []byte {
	for _, e := range entries {
		var h int
		b, h = header(b, msgWill)
		b = binary.BigEndian.AppendUint32(b, e.Key)
		if e.Frame != nil {
			note := e.Note
			if len(note) > MaxNote {
				note = note[:MaxNote]
			}
			b = binary.BigEndian.AppendUint16(b, uint16(len(note)))
			b = append(b, note...)
			b = append(b, e.Frame...)
		}
		b = finish(b, h)
	}
	return b
}

func appendDeliver(b []byte, at sim.Time, frame []byte) []byte {
	b, h := header(b, msgDeliver)
	b = binary.BigEndian.AppendUint64(b, uint64(at))
	return finish(append(b, frame...), h)
}

func appendText(b []byte, t msgType, text string) []byte {
	b, h := header(b, t)
	return finish(append(b, text...), h)
}

func appendEmpty(b []byte, t msgType) []byte {
	b, h := header(b, t)
	return finish(b, h)
}

// NodeInfo is one node of the fabric as the attach reply describes it.
type NodeInfo struct {
	Name string
	MAC  wire.MAC
	IPv4 netip.Addr
	IPv6 netip.Addr
}

// nodeInfoLen is a NodeInfo's fixed part: name length, MAC, IPv4, IPv6.
const nodeInfoLen = 1 + 6 + 4 + 16

// nodesPerMessage is how many nodes one attached or nodes message lists:
// at most MaxMessage even with every name MaxNodeName long.
const nodesPerMessage = (MaxMessage - 64) / (nodeInfoLen + MaxNodeName)

// appendAttached is the attach reply: the node's index, the time, how
// many nodes the fabric has, and the first of them; the rest follow in
// msgNodes messages of nodesPerMessage each, so that a fabric of any size
// is described in messages within MaxMessage.
func appendAttached(b []byte, index int, now sim.Time, nodes []NodeInfo) []byte {
	b, h := header(b, msgAttached)
	b = binary.BigEndian.AppendUint16(b, uint16(index))
	b = binary.BigEndian.AppendUint64(b, uint64(now))
	b = binary.BigEndian.AppendUint16(b, uint16(len(nodes)))
	first := nodes[:min(len(nodes), nodesPerMessage)]
	b = finish(appendNodeInfos(b, first), h)
	for rest := nodes[len(first):]; len(rest) > 0; {
		part := rest[:min(len(rest), nodesPerMessage)]
		b, h = header(b, msgNodes)
		b = binary.BigEndian.AppendUint16(b, uint16(len(part)))
		b = finish(appendNodeInfos(b, part), h)
		rest = rest[len(part):]
	}
	return b
}

// appendNodeInfos appends each node's name, MAC, IPv4 and IPv6.
func appendNodeInfos(b []byte, nodes []NodeInfo) []byte {
	for _, n := range nodes {
		b = append(b, byte(len(n.Name)))
		b = append(b, n.Name...)
		b = append(b, n.MAC[:]...)
		v4, v6 := n.IPv4.As4(), n.IPv6.As16()
		b = append(b, v4[:]...)
		b = append(b, v6[:]...)
	}
	return b
}

// parseAttached reads an attach reply: the node's index, the time, the
// fabric's node count and the nodes this message lists (the rest come in
// msgNodes messages: parseNodes).
func parseAttached(body []byte) (index int, now sim.Time, total int, nodes []NodeInfo, err error) {
	if len(body) < 12 {
		return 0, 0, 0, nil, protoErr("attached: %d bytes", len(body))
	}
	index = int(binary.BigEndian.Uint16(body))
	now = sim.Time(binary.BigEndian.Uint64(body[2:]))
	total = int(binary.BigEndian.Uint16(body[10:]))
	nodes, err = parseNodeInfos(body[12:], min(total, nodesPerMessage), "attached")
	if err == nil && (index < 1 || index > total) {
		err = protoErr("attached: index %d of %d nodes", index, total)
	}
	return index, now, total, nodes, err
}

// parseNodes reads a msgNodes message: the next nodes of the attach reply.
func parseNodes(body []byte) ([]NodeInfo, error) {
	if len(body) < 2 {
		return nil, protoErr("nodes: %d bytes", len(body))
	}
	n := int(binary.BigEndian.Uint16(body))
	if n < 1 || n > nodesPerMessage {
		return nil, protoErr("nodes: %d nodes, want 1 to %d", n, nodesPerMessage)
	}
	return parseNodeInfos(body[2:], n, "nodes")
}

// parseNodeInfos reads n nodes that must fill body exactly.
func parseNodeInfos(body []byte, n int, what string) ([]NodeInfo, error) {
	nodes := make([]NodeInfo, 0, n)
	for range n {
		if len(body) < 1 || len(body) < nodeInfoLen+int(body[0]) {
			return nil, protoErr("%s: node list cut short", what)
		}
		l := int(body[0])
		ni := NodeInfo{Name: string(body[1 : 1+l])}
		body = body[1+l:]
		copy(ni.MAC[:], body)
		ni.IPv4 = netip.AddrFrom4([4]byte(body[6:10]))
		ni.IPv6 = netip.AddrFrom16([16]byte(body[10:26]))
		nodes = append(nodes, ni)
		body = body[26:]
	}
	if len(body) != 0 {
		return nil, protoErr("%s: %d bytes after %d nodes", what, len(body), n)
	}
	return nodes, nil
}

// parseTime reads a body that is one virtual time.
func parseTime(t msgType, body []byte) (sim.Time, error) {
	if len(body) != 8 {
		return 0, protoErr("message type %d: %d bytes, want 8", t, len(body))
	}
	at := sim.Time(binary.BigEndian.Uint64(body))
	if at < 0 {
		return 0, protoErr("message type %d: negative time %d", t, at)
	}
	return at, nil
}

// parseFrame reads a frame message's body; note and frame alias body.
func parseFrame(body []byte) (note, frame []byte, err error) {
	if len(body) < 2 {
		return nil, nil, protoErr("frame: %d bytes", len(body))
	}
	n := int(binary.BigEndian.Uint16(body))
	if n > MaxNote || 2+n > len(body) {
		return nil, nil, protoErr("frame: note of %d bytes in a body of %d", n, len(body))
	}
	frame = body[2+n:]
	if len(frame) < wire.EthernetLen || len(frame) > fabric.MaxFrame {
		return nil, nil, protoErr("frame: %d bytes, want %d to %d", len(frame), wire.EthernetLen, fabric.MaxFrame)
	}
	return body[2 : 2+n], frame, nil
}

// parseWill reads a will message: its key, and its frame and note, or a
// nil frame for a key taken out.
func parseWill(body []byte) (key uint32, note, frame []byte, err error) {
	if len(body) < 4 {
		return 0, nil, nil, protoErr("will: %d bytes", len(body))
	}
	key = binary.BigEndian.Uint32(body)
	if len(body) == 4 {
		return key, nil, nil, nil
	}
	note, frame, err = parseFrame(body[4:])
	return key, note, frame, err
}

// reader reads messages from one stream into a reused buffer.
type reader struct {
	r   io.Reader
	buf []byte
}

// next reads one message. The body is valid until the next call. An
// error wrapping ErrProtocol means the peer sent something malformed;
// any other error is the stream's own (io.EOF when it closed cleanly
// between messages).
func (r *reader) next() (msgType, []byte, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r.r, hdr[:]); err != nil {
		if err == io.ErrUnexpectedEOF {
			return 0, nil, fmt.Errorf("%w: %w", protoErr("stream ends inside a length field"), io.ErrUnexpectedEOF)
		}
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if n < 2 || n > MaxMessage {
		return 0, nil, protoErr("length %d, want 2 to %d", n, MaxMessage)
	}
	if cap(r.buf) < int(n) {
		r.buf = make([]byte, n, MaxMessage)
	}
	b := r.buf[:n]
	if _, err := io.ReadFull(r.r, b); err != nil {
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			// Malformed, or a writer killed inside its write: the
			// daemon tells the two apart by who wrote (handle).
			return 0, nil, fmt.Errorf("%w: %w", protoErr("stream ends inside a %d-byte message", n), io.ErrUnexpectedEOF)
		}
		return 0, nil, err
	}
	if b[0] != Version {
		return 0, nil, protoErr("version %d, this fabric speaks %d", b[0], Version)
	}
	t := msgType(b[1])
	if t < msgAttach || t > msgTick {
		return 0, nil, protoErr("unknown message type %d", t)
	}
	return t, b[2:], nil
}

package main

import (
	"errors"

	"github.com/rocesim/rocesim/wire"
	"github.com/rocesim/rocesim/wire/capture"
)

// packetJSON is one line of "inspect --json": the same information as a
// text line, as typed fields. Headers a frame does not carry are absent.
type packetJSON struct {
	Index         int      `json:"index"`                    // from 1, as Wireshark numbers frames
	TimeNS        int64    `json:"time_ns"`                  // absolute: nanoseconds since the Unix epoch
	RelNS         int64    `json:"rel_ns"`                   // nanoseconds since frame 1
	Interface     int      `json:"interface"`                // pcapng interface index; 0 in a pcap file
	InterfaceName string   `json:"interface_name,omitempty"` // pcapng if_name
	Len           int      `json:"len"`                      // bytes captured
	OrigLen       int      `json:"orig_len,omitempty"`       // bytes on the wire, only when the capture cut the frame
	RoCE          bool     `json:"roce"`                     // RoCE v2 (UDP port 4791), well formed or not
	Summary       string   `json:"summary,omitempty"`        // what a non-RoCE frame is, e.g. "IPv4 TCP 47142→18515"
	Src           string   `json:"src,omitempty"`            // IP source
	Dst           string   `json:"dst,omitempty"`            // IP destination
	*roceJSON              // present once the BTH decoded
	Comments      []string `json:"comments,omitempty"`   // pcapng packet comments
	ErrorCode     string   `json:"error_code,omitempty"` // wire.ErrorCode name, e.g. "bad-icrc"
	Error         string   `json:"error,omitempty"`      // the decode error of a RoCE frame
}

// roceJSON is the transport part of a RoCE v2 frame.
type roceJSON struct {
	UDPSrcPort   uint16            `json:"udp_sport"`
	Opcode       uint8             `json:"opcode"`
	OpcodeName   string            `json:"opcode_name"` // e.g. "RC_SEND_ONLY"
	SE           bool              `json:"se"`
	PadCount     uint8             `json:"pad_count"`
	PKey         uint16            `json:"pkey"`
	FECN         bool              `json:"fecn"`
	BECN         bool              `json:"becn"`
	DestQP       uint32            `json:"dest_qp"`
	AckReq       bool              `json:"ack_req"`
	PSN          uint32            `json:"psn"`
	DETH         *dethJSON         `json:"deth,omitempty"`
	RETH         *rethJSON         `json:"reth,omitempty"`
	AtomicETH    *atomicETHJSON    `json:"atomic_eth,omitempty"`
	AETH         *aethJSON         `json:"aeth,omitempty"`
	AtomicAckETH *atomicAckETHJSON `json:"atomic_ack_eth,omitempty"`
	Imm          *uint32           `json:"imm,omitempty"`
	IETH         *iethJSON         `json:"ieth,omitempty"`
	PayloadLen   *int              `json:"payload_len,omitempty"` // present for opcodes that carry payload
	ICRCOK       *bool             `json:"icrc_ok,omitempty"`     // absent when the ICRC could not be checked
}

type dethJSON struct {
	QKey  uint32 `json:"qkey"`
	SrcQP uint32 `json:"src_qp"`
}

type rethJSON struct {
	VA     uint64 `json:"va"`
	RKey   uint32 `json:"rkey"`
	DMALen uint32 `json:"dma_len"`
}

type atomicETHJSON struct {
	VA      uint64 `json:"va"`
	RKey    uint32 `json:"rkey"`
	SwapAdd uint64 `json:"swap_add"`
	Compare uint64 `json:"compare"`
}

type aethJSON struct {
	Syndrome     uint8  `json:"syndrome"`
	SyndromeText string `json:"syndrome_text"` // "ACK", "RNR-NAK(timer=12: 0.64 ms)", "NAK(PSN sequence error)"
	MSN          uint32 `json:"msn"`
}

type atomicAckETHJSON struct {
	Orig uint64 `json:"orig"`
}

type iethJSON struct {
	RKey uint32 `json:"rkey"`
}

// writeJSON writes one frame as a JSON line, filling the inspector's
// reused structs.
func (in *inspector) writeJSON(rec *capture.Record, v verdict, err error) error {
	p := &in.p
	j := &in.j
	*j = packetJSON{
		Index:     in.sum.Frames,
		TimeNS:    rec.Time,
		RelNS:     rec.Time - in.t0,
		Interface: rec.Interface,
		Len:       len(rec.Data),
		RoCE:      v != verdictOther,
		Comments:  rec.Comments,
	}
	if in.rd.Format() == capture.FormatPcapng {
		if ifc, ok := in.rd.Interface(rec.Interface); ok {
			j.InterfaceName = ifc.Name
		}
	}
	if rec.OrigLen != len(rec.Data) {
		j.OrigLen = rec.OrigLen
	}
	if p.IPv4 != nil || p.IPv6 != nil {
		j.Src, j.Dst = p.Src().String(), p.Dst().String()
	}
	switch v {
	case verdictOther:
		in.line = appendOther(in.line[:0], p, rec)
		j.Summary = string(in.line)
	case verdictBadICRC, verdictMalformed:
		j.Error = err.Error()
		var we *wire.Error
		if errors.As(err, &we) {
			j.ErrorCode = we.Code.String()
		}
	}
	if v != verdictOther && p.BTH != nil {
		j.roceJSON = in.fillRoCE(v)
	}
	return in.enc.Encode(j)
}

// fillRoCE fills in.roce from the decoded packet.
func (in *inspector) fillRoCE(v verdict) *roceJSON {
	p := &in.p
	bth := p.BTH
	r := &in.roce
	*r = roceJSON{
		UDPSrcPort: p.UDP.SrcPort(),
		Opcode:     uint8(bth.Opcode()),
		OpcodeName: bth.Opcode().String(),
		SE:         bth.SolicitedEvent(),
		PadCount:   bth.PadCount(),
		PKey:       bth.PKey(),
		FECN:       bth.FECN(),
		BECN:       bth.BECN(),
		DestQP:     bth.DestQP(),
		AckReq:     bth.AckReq(),
		PSN:        uint32(bth.PSN()),
	}
	if d := p.DETH; d != nil {
		in.deth = dethJSON{QKey: d.QKey(), SrcQP: d.SrcQP()}
		r.DETH = &in.deth
	}
	if x := p.RETH; x != nil {
		in.reth = rethJSON{VA: x.VA(), RKey: x.RKey(), DMALen: x.DMALength()}
		r.RETH = &in.reth
	}
	if a := p.AtomicETH; a != nil {
		in.atomicETH = atomicETHJSON{VA: a.VA(), RKey: a.RKey(), SwapAdd: a.SwapAddData(), Compare: a.CompareData()}
		r.AtomicETH = &in.atomicETH
	}
	if a := p.AETH; a != nil {
		in.aeth = aethJSON{Syndrome: uint8(a.Syndrome()), SyndromeText: a.Syndrome().String(), MSN: a.MSN()}
		r.AETH = &in.aeth
	}
	if a := p.AtomicAckETH; a != nil {
		in.atomicAck = atomicAckETHJSON{Orig: a.OrigRemoteData()}
		r.AtomicAckETH = &in.atomicAck
	}
	if i := p.ImmDt; i != nil {
		in.imm = i.Value()
		r.Imm = &in.imm
	}
	if i := p.IETH; i != nil {
		in.ieth = iethJSON{RKey: i.RKey()}
		r.IETH = &in.ieth
	}
	if hasPayload(p) {
		in.payloadLen = len(p.Payload)
		r.PayloadLen = &in.payloadLen
	}
	if v == verdictOK || v == verdictBadICRC {
		in.icrcOK = v == verdictOK
		r.ICRCOK = &in.icrcOK
	}
	return r
}

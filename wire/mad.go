package wire

import (
	"encoding/binary"
	"errors"
)

// A Communication Management MAD, as rxe's hosts carry it (measured in
// wire/testdata/cm/, see wire/testdata/cm/README.md):
//
//  1. a RoCE v2 UD SEND_ONLY (BTH opcode 0x64) to QP1, the GSI QP, with a
//     DETH of Q_Key 0x80010000 (GSIQKey) and source QP 1;
//  2. 256 bytes of MAD (IBTA vol. 1 §13.4.2): the 24-byte common MAD
//     header (base version 1, class 0x07 = CM, class version 2, method
//     Send 0x03, the transaction ID, the attribute ID naming the message),
//  3. then the 232 bytes of the CM message (IBTA vol. 1 §12.6), whose
//     layout depends on the attribute ID: REQ, MRA, REJ, REP, RTU, DREQ,
//     DREP (cm.go).

// MAD sizes and the values a CM MAD carries in its header.
const (
	MADLen       = 256 // a MAD, header included (IBTA §13.4.1)
	MADHeaderLen = 24  // the common MAD header (IBTA §13.4.2)
	MADDataLen   = MADLen - MADHeaderLen

	// GSIQPN is QP1, the General Services Interface QP every port has
	// (IBTA §3.5.4, §13.5.1): CM MADs go to it and come from it.
	GSIQPN = 1
	// MulticastQPN is the destination QP of a datagram sent to a
	// multicast group, the QPN 0xFFFFFF the IBTA reserves for it: the
	// receiving port hands it to every QP attached to the group.
	MulticastQPN = 0xFFFFFF
	// GSIQKey is the well-known Q_Key of QP1 (IBTA §13.5.1, C13-9), in
	// every captured CM frame's DETH.
	GSIQKey = 0x80010000

	MADBaseVersion  = 1    // IBTA §13.4.2
	MADClassCM      = 0x07 // Communication Management (IBTA Table 111)
	MADClassVersion = 2    // the CM class version rxe's kernel sends
	MADMethodSend   = 0x03 // CM messages are all sent with Send() (IBTA §12.6)
)

// ErrMADShort is returned when a buffer is shorter than a MAD.
var ErrMADShort = errors.New("wire: MAD shorter than 256 bytes")

// MAD is a byte view of one 256-byte management datagram: the common
// header, then the class's data.
type MAD []byte

// MADHeader holds the common MAD header (IBTA §13.4.2, figure 145).
type MADHeader struct {
	BaseVersion   uint8
	MgmtClass     uint8
	ClassVersion  uint8
	Method        uint8 // R bit (0x80) included
	Status        uint16
	ClassSpecific uint16
	TransactionID uint64
	AttributeID   uint16
	Resv16        uint16 // reserved, kept for byte-exact re-encoding
	AttributeMod  uint32
}

// Header returns the common MAD header.
func (m MAD) Header() MADHeader {
	_ = m[MADHeaderLen-1]
	return MADHeader{
		BaseVersion:   m[0],
		MgmtClass:     m[1],
		ClassVersion:  m[2],
		Method:        m[3],
		Status:        binary.BigEndian.Uint16(m[4:]),
		ClassSpecific: binary.BigEndian.Uint16(m[6:]),
		TransactionID: binary.BigEndian.Uint64(m[8:]),
		AttributeID:   binary.BigEndian.Uint16(m[16:]),
		Resv16:        binary.BigEndian.Uint16(m[18:]),
		AttributeMod:  binary.BigEndian.Uint32(m[20:]),
	}
}

// SetHeader writes the common MAD header.
func (m MAD) SetHeader(h *MADHeader) {
	_ = m[MADHeaderLen-1]
	m[0], m[1], m[2], m[3] = h.BaseVersion, h.MgmtClass, h.ClassVersion, h.Method
	binary.BigEndian.PutUint16(m[4:], h.Status)
	binary.BigEndian.PutUint16(m[6:], h.ClassSpecific)
	binary.BigEndian.PutUint64(m[8:], h.TransactionID)
	binary.BigEndian.PutUint16(m[16:], h.AttributeID)
	binary.BigEndian.PutUint16(m[18:], h.Resv16)
	binary.BigEndian.PutUint32(m[20:], h.AttributeMod)
}

// Data returns the class data after the header (232 bytes for a MAD).
func (m MAD) Data() []byte { return m[MADHeaderLen:MADLen] }

// IsCM reports whether the header is a CM Send of the version rxe speaks.
func (m MAD) IsCM() bool {
	return len(m) >= MADLen && m[0] == MADBaseVersion && m[1] == MADClassCM && m[2] == MADClassVersion
}

// CMAttr returns the attribute ID of a CM MAD, the message it carries
// (IBTA §12.6: REQ, REP, RTU, ...); 0 when the MAD is not a CM Send
// (IsCM false or another method), so a caller never mistakes another
// class's attribute for a CM message.
func (m MAD) CMAttr() CMAttr {
	if !m.IsCM() || m[3] != MADMethodSend {
		return 0
	}
	return CMAttr(binary.BigEndian.Uint16(m[16:]))
}

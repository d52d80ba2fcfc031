package wire

// ErrorCode classifies why a frame could not be decoded or encoded. It is
// small and dense so that a receiver can keep one counter per code in an
// array: malformed frames are counted, never fatal.
type ErrorCode uint8

// The ways a frame can be wrong. The order is fixed: codes index counter
// arrays and appear in traces.
const (
	CodeTruncated      ErrorCode = iota + 1 // frame ends inside a header or before the ICRC
	CodeNotRoCE                             // not IPv4/IPv6 + UDP to port 4791
	CodeFragment                            // an IPv4 fragment (rocesim does not reassemble)
	CodeIPHeader                            // IP version or header length field is invalid
	CodeIPChecksum                          // IPv4 header checksum does not verify
	CodeLength                              // IP or UDP length fields disagree with each other or with the opcode
	CodeUnknownOpcode                       // opcode is reserved or of a transport rocesim does not speak
	CodeHeaderVersion                       // BTH TVer is not 0
	CodePad                                 // pad count or transport length alignment is inconsistent
	CodeICRC                                // invariant CRC does not match
	CodeBufferTooSmall                      // encode: the caller's buffer cannot hold the frame
	CodeBadFrame                            // encode: the Frame description is inconsistent
	numErrorCodes
)

// NumErrorCodes is one more than the largest ErrorCode, for sizing counter arrays.
const NumErrorCodes = int(numErrorCodes)

var errorCodeNames = [...]string{
	CodeTruncated:      "truncated",
	CodeNotRoCE:        "not-roce",
	CodeFragment:       "ip-fragment",
	CodeIPHeader:       "bad-ip-header",
	CodeIPChecksum:     "bad-ip-checksum",
	CodeLength:         "bad-length",
	CodeUnknownOpcode:  "unknown-opcode",
	CodeHeaderVersion:  "bad-header-version",
	CodePad:            "bad-pad",
	CodeICRC:           "bad-icrc",
	CodeBufferTooSmall: "buffer-too-small",
	CodeBadFrame:       "bad-frame",
}

// String returns a short, stable, kebab-case name for the code.
func (c ErrorCode) String() string {
	if int(c) < len(errorCodeNames) && errorCodeNames[c] != "" {
		return errorCodeNames[c]
	}
	return "unknown-error"
}

// Error is the type of every error this package returns. The package-level
// values below are the only instances, so returning one never allocates and
// callers compare with errors.Is (or errors.As to read the Code).
type Error struct {
	Code ErrorCode
	msg  string
}

// Error returns the message.
func (e *Error) Error() string { return e.msg }

// Decode and encode errors. Each is a distinct *Error; compare with errors.Is.
var (
	ErrTruncated      = &Error{CodeTruncated, "wire: frame truncated"}
	ErrNotRoCE        = &Error{CodeNotRoCE, "wire: not a RoCE v2 frame (IPv4/IPv6, UDP destination port 4791)"}
	ErrFragment       = &Error{CodeFragment, "wire: IPv4 fragment (not reassembled)"}
	ErrIPHeader       = &Error{CodeIPHeader, "wire: invalid IP version or header length"}
	ErrIPChecksum     = &Error{CodeIPChecksum, "wire: IPv4 header checksum mismatch"}
	ErrLength         = &Error{CodeLength, "wire: IP/UDP length fields inconsistent with the frame"}
	ErrUnknownOpcode  = &Error{CodeUnknownOpcode, "wire: unknown or reserved BTH opcode"}
	ErrHeaderVersion  = &Error{CodeHeaderVersion, "wire: BTH header version (TVer) is not 0"}
	ErrPad            = &Error{CodePad, "wire: pad count inconsistent with the transport length"}
	ErrICRC           = &Error{CodeICRC, "wire: invariant CRC mismatch"}
	ErrBufferTooSmall = &Error{CodeBufferTooSmall, "wire: buffer too small for frame"}
	ErrBadFrame       = &Error{CodeBadFrame, "wire: inconsistent frame description (address families, payload on an opcode without one, or IPv4 options)"}
)

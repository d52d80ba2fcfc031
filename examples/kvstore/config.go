package kvstore

import (
	"errors"
	"fmt"
	"net/netip"
	"syscall"

	"github.com/rocesim/rocesim/verbs"
)

// Errors an Op ends with, or Get and Put return. Compare them with
// errors.Is: Get and Put wrap them with the detail at fault.
var (
	// ErrNotFound ends a GET of a key the server does not hold.
	ErrNotFound = errors.New("kvstore: key not found")
	// ErrNoSpace ends a PUT the server's value pool has no room for; the
	// key keeps its previous value, if it had one.
	ErrNoSpace = errors.New("kvstore: server value pool is full")
	// ErrBusy is returned by Get and Put when every request slot is in
	// use: call Progress until an Op completes and try again.
	ErrBusy = errors.New("kvstore: every request slot is in use")
	// ErrTooLarge is returned by Get and Put for a key over MaxKey or a
	// value over MaxValue; it also ends a GET whose value is larger than
	// the client's MaxValue (the server's limit may be higher).
	ErrTooLarge = errors.New("kvstore: key or value too large")
	// ErrBadRequest ends an Op the server found malformed. A Client never
	// sends one; a peer speaking the protocol wrongly may.
	ErrBadRequest = errors.New("kvstore: the server rejected a malformed request")
)

// Endpoint is what the two sides exchange over the control channel (a
// TCP connection in a real deployment, a function call in a test) to
// connect their queue pairs: what ibv_rc_pingpong exchanges as
// "LID QPN PSN GID".
type Endpoint struct {
	// QPN is the queue pair number the peer sends to.
	QPN uint32
	// PSN is the first packet sequence number this side will send; the
	// peer expects it (RTR's rq_psn).
	PSN uint32
	// GID is this side's RoCE v2 GID (index 1: the IPv4 address mapped
	// into IPv6).
	GID netip.Addr
}

// Config sizes a Server or a Client and sets the transport attributes of
// their queue pairs. The zero value of every field means its default;
// the two sides of a connection should use the same MaxKey and
// MaxValue (a server's receive buffers hold its own MaxKey and MaxValue).
type Config struct {
	// Slots is how many requests a client may have outstanding, and how
	// many receives a server posts per connection. Default 8, at most
	// 1024.
	Slots int
	// RecvDepth is how many receives a client keeps posted for
	// responses. Default (and at most) Slots. Fewer save memory, but then
	// responses can outrun the client: one that finds no receive posted
	// gets an RNR NAK, and the server's NIC retries it after the RNR
	// timer (MinRNRTimer), RNRRetry times.
	RecvDepth int
	// MaxKey is the largest key, in bytes. Default 64, at most 65535 (the
	// key length is 16 bits on the wire).
	MaxKey int
	// MaxValue is the largest value, in bytes. Default 4096.
	MaxValue int
	// PoolSize is the size in bytes of the server's value pool, the one
	// registered region every stored value lives in. Default 1 MiB.
	PoolSize int
	// PathMTU is the path MTU set at RTR. Default verbs.MTU1024, what the
	// default link carries.
	PathMTU verbs.MTU
	// Timeout is the local ACK timeout exponent set at RTS: the
	// requester retries after 4.096 µs × 2^Timeout, under rxe's profile
	// rounded down to whole 4 ms jiffies (nic.Profile.ACKTimeout).
	// Default 14 (67.1 ms; 64 ms under rxe).
	// The IBTA's 0 (wait forever) cannot be asked for.
	Timeout uint8
	// RetryCnt is how many times the requester retransmits after a
	// timeout or NAK before failing with RETRY_EXC_ERR (0..7). Zero means
	// the default, 7, unless SetRetry is true.
	RetryCnt uint8
	// RNRRetry is how many times the requester retries after an RNR NAK
	// before failing with RNR_RETRY_EXC_ERR (0..7, 7 retries forever).
	// Zero means the default, 7, unless SetRetry is true.
	RNRRetry uint8
	// MinRNRTimer is the RNR timer code the responder advertises in its
	// RNR NAKs, set at RTR. Default 12 (0.64 ms); code 0 (655 ms)
	// cannot be asked for.
	MinRNRTimer uint8
	// SetRetry makes RetryCnt and RNRRetry be used as given, zero
	// included: set it to ask for no retries at all.
	SetRetry bool
}

// Defaults of Config's fields.
const (
	DefaultSlots       = 8
	DefaultMaxKey      = 64
	DefaultMaxValue    = 4096
	DefaultPoolSize    = 1 << 20
	DefaultPathMTU     = verbs.MTU1024
	DefaultTimeout     = 14
	DefaultRetryCnt    = 7
	DefaultRNRRetry    = 7
	DefaultMinRNRTimer = 12
)

// Limits on Config's fields.
const (
	maxSlots    = 1024
	maxKeyLimit = 1<<16 - 1
	maxValueLim = 1 << 30
)

// resolve returns cfg with its defaults filled in, or an EINVAL error
// naming the field out of range.
func (cfg Config) resolve() (Config, error) {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&cfg.Slots, DefaultSlots)
	def(&cfg.RecvDepth, cfg.Slots)
	def(&cfg.MaxKey, DefaultMaxKey)
	def(&cfg.MaxValue, DefaultMaxValue)
	def(&cfg.PoolSize, DefaultPoolSize)
	if cfg.PathMTU == 0 {
		cfg.PathMTU = DefaultPathMTU
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.MinRNRTimer == 0 {
		cfg.MinRNRTimer = DefaultMinRNRTimer
	}
	if !cfg.SetRetry {
		if cfg.RetryCnt == 0 {
			cfg.RetryCnt = DefaultRetryCnt
		}
		if cfg.RNRRetry == 0 {
			cfg.RNRRetry = DefaultRNRRetry
		}
	}
	switch {
	case cfg.Slots < 0 || cfg.Slots > maxSlots:
		return cfg, invalid("Slots %d is not in 1..%d", cfg.Slots, maxSlots)
	case cfg.RecvDepth < 0 || cfg.RecvDepth > cfg.Slots:
		return cfg, invalid("RecvDepth %d is not in 1..Slots (%d)", cfg.RecvDepth, cfg.Slots)
	case cfg.MaxKey < 0 || cfg.MaxKey > maxKeyLimit:
		return cfg, invalid("MaxKey %d is not in 1..%d", cfg.MaxKey, maxKeyLimit)
	case cfg.MaxValue < 0 || cfg.MaxValue > maxValueLim:
		return cfg, invalid("MaxValue %d is not in 1..%d", cfg.MaxValue, maxValueLim)
	case cfg.PoolSize < 0:
		return cfg, invalid("PoolSize %d is negative", cfg.PoolSize)
	case cfg.Timeout > 31:
		return cfg, invalid("Timeout %d is not in 0..31", cfg.Timeout)
	case cfg.RetryCnt > 7:
		return cfg, invalid("RetryCnt %d is not in 0..7", cfg.RetryCnt)
	case cfg.RNRRetry > 7:
		return cfg, invalid("RNRRetry %d is not in 0..7", cfg.RNRRetry)
	case cfg.MinRNRTimer > 31:
		return cfg, invalid("MinRNRTimer %d is not in 0..31", cfg.MinRNRTimer)
	}
	return cfg, nil
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("kvstore: config: "+format+": %w", append(args, syscall.EINVAL)...)
}

// WCError is a failed work completion: the status the device reported
// for one work request. Ops fail with it (see the package doc for which
// Op gets which), and Server.Errors lists every one a server saw.
type WCError struct {
	// Status is the completion's status (never WCSuccess).
	Status verbs.WCStatus
	// Opcode is the completion's opcode: WCSend, WCRDMAWrite or WCRecv.
	Opcode verbs.WCOpcode
	// WRID is the work request's ID: a client's request slot for a SEND;
	// the request ID being answered for a server's SEND or WRITE; the
	// receive buffer's index for a receive.
	WRID uint64
	// QPN is the number of the local queue pair the completion is for.
	QPN uint32
}

// Error reads like "kvstore: send completion on QP 0x11: transport retry
// counter exceeded", with the status as ibv_wc_status_str prints it.
func (e *WCError) Error() string {
	var kind string
	switch e.Opcode {
	case verbs.WCSend:
		kind = "send"
	case verbs.WCRDMAWrite:
		kind = "RDMA write"
	case verbs.WCRecv:
		kind = "receive"
	default:
		kind = e.Opcode.String()
	}
	return fmt.Sprintf("kvstore: %s completion on QP %#x: %v", kind, e.QPN, e.Status)
}

func wcError(wc *verbs.WC) *WCError {
	return &WCError{Status: wc.Status, Opcode: wc.Opcode, WRID: wc.WRID, QPN: wc.QPNum}
}

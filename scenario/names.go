package scenario

import (
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/rocesim/rocesim/nic"
)

// The names a scenario file uses for libibverbs values, and their
// canonical spellings in results and messages.

// wcStatusByName maps "IBV_WC_RETRY_EXC_ERR" and "RETRY_EXC_ERR" (any
// case) to the status.
var wcStatusByName = func() map[string]nic.WCStatus {
	m := map[string]nic.WCStatus{}
	for s := nic.WCSuccess; s <= nic.WCTMRndvIncomplete; s++ {
		n := s.Name()
		m[n] = s
		m[strings.TrimPrefix(n, "IBV_WC_")] = s
	}
	return m
}()

// wcOpcodes are the completion opcodes a scenario may name.
var wcOpcodes = []nic.WCOpcode{nic.WCSend, nic.WCRDMAWrite, nic.WCRDMARead, nic.WCCompSwap, nic.WCFetchAdd,
	nic.WCBindMW, nic.WCLocalInv, nic.WCRecv, nic.WCRecvRDMAWithImm}

// wcOpcodeByName maps "IBV_WC_RECV" and "RECV" (any case) to the opcode.
var wcOpcodeByName = func() map[string]nic.WCOpcode {
	m := map[string]nic.WCOpcode{}
	for _, o := range wcOpcodes {
		n := o.String()
		m[n] = o
		m[strings.TrimPrefix(n, "IBV_WC_")] = o
	}
	return m
}()

// eventByName maps "IBV_EVENT_CQ_ERR" and "CQ_ERR" (any case) to the
// asynchronous event type.
var eventByName = func() map[string]nic.AsyncEventType {
	m := map[string]nic.AsyncEventType{}
	for e := nic.EventCQErr; e <= nic.EventGIDChange; e++ {
		m[e.String()] = e
		m["IBV_EVENT_"+e.String()] = e
	}
	return m
}()

// eventName is the libibverbs constant name of an event type, as results
// and traces spell it: "IBV_EVENT_CQ_ERR".
func eventName(e nic.AsyncEventType) string { return "IBV_EVENT_" + e.String() }

// qpStateByName maps "rts" (any case) to the state.
var qpStateByName = func() map[string]nic.QPState {
	m := map[string]nic.QPState{}
	for s := nic.QPStateReset; s <= nic.QPStateErr; s++ {
		m[s.String()] = s
	}
	return m
}()

// counterNames are rxe's counter names, the only ones expect counter takes.
var counterNames = func() map[string]bool {
	m := map[string]bool{}
	var c nic.Counters
	for _, n := range c.Names() {
		m[n] = true
	}
	return m
}()

// sendOps are the work request opcodes a send step names.
var sendOps = map[string]nic.WROpcode{
	"send":      nic.WRSend,
	"send_imm":  nic.WRSendWithImm,
	"write":     nic.WRRDMAWrite,
	"write_imm": nic.WRRDMAWriteWithImm,
	"read":      nic.WRRDMARead,
	"cas":       nic.WRAtomicCmpAndSwp,
	"faa":       nic.WRAtomicFetchAndAdd,
	"send_inv":  nic.WRSendWithInv,
	"local_inv": nic.WRLocalInv,
	"bind":      nic.WRBindMW,
}

// accessByName are the access flag words of access=.
var accessByName = map[string]nic.AccessFlags{
	"local_write":   nic.AccessLocalWrite,
	"remote_write":  nic.AccessRemoteWrite,
	"remote_read":   nic.AccessRemoteRead,
	"remote_atomic": nic.AccessRemoteAtomic,
	"mw_bind":       nic.AccessMWBind,
}

// lookupUpper looks name up in m as written and in upper case.
func lookupUpper[V any](m map[string]V, name string) (V, bool) {
	if v, ok := m[name]; ok {
		return v, true
	}
	v, ok := m[strings.ToUpper(name)]
	return v, ok
}

// errnoNames are the errnos a rereg step can answer, in the order
// messages list them: the libibverbs errnos of ibv_rereg_mr(3) and
// rxe's EOPNOTSUPP.
var errnoNames = []errnoEntry{{"EOPNOTSUPP", syscall.EOPNOTSUPP}, {"EINVAL", syscall.EINVAL}, {"ENOMEM", syscall.ENOMEM}, {"EACCES", syscall.EACCES},
	{"EPERM", syscall.EPERM}, {"EFAULT", syscall.EFAULT}, {"EBUSY", syscall.EBUSY}, {"ENOSYS", syscall.ENOSYS}}

// errnoEntry is one errno and its name.
type errnoEntry struct {
	name string
	e    syscall.Errno
}

// ErrnoName names an errno as a rereg answer does (Rereg.Errno), or "errno N" for another.
func ErrnoName(e syscall.Errno) string {
	for _, n := range errnoNames {
		if n.e == e {
			return n.name
		}
	}
	return "errno " + strconv.Itoa(int(e))
}

// wcFlagName is one completion flag and its verbs.h name.
type wcFlagName struct {
	name string
	flag nic.WCFlags
}

// wcFlagNames are the completion flags of libibverbs' enum ibv_wc_flags
// (verbs.h), in bit order: the names flags= takes and WCFlagsName
// writes. The tag-matching ones are there because verbs.h spells them; no
// profile sets them.
var wcFlagNames = []wcFlagName{
	{"IBV_WC_GRH", nic.WCFlagGRH},
	{"IBV_WC_WITH_IMM", nic.WCFlagWithImm},
	{"IBV_WC_IP_CSUM_OK", nic.WCFlagIPCSumOK},
	{"IBV_WC_WITH_INV", nic.WCFlagWithInv},
	{"IBV_WC_TM_SYNC_REQ", 1 << 4},
	{"IBV_WC_TM_MATCH", 1 << 5},
	{"IBV_WC_TM_DATA_VALID", 1 << 6},
}

// WCFlagsName spells wc_flags as an expect line's flags= does and
// Completion.WCFlags holds them: the verbs.h names joined by "|" in bit
// order ("IBV_WC_GRH|IBV_WC_WITH_IMM"), "0" for none, and bits verbs.h
// does not name as one hexadecimal number at the end.
func WCFlagsName(f nic.WCFlags) string {
	if f == 0 {
		return "0"
	}
	var parts []string
	for _, n := range wcFlagNames {
		if f&n.flag != 0 {
			parts = append(parts, n.name)
			f &^= n.flag
		}
	}
	if f != 0 {
		parts = append(parts, "0x"+strconv.FormatUint(uint64(f), 16))
	}
	return strings.Join(parts, "|")
}

// wcFlagList is the names flags= takes, for messages.
func wcFlagList() string {
	var names []string
	for _, n := range wcFlagNames {
		names = append(names, n.name)
	}
	return strings.Join(names, ", ")
}

// parseWCFlags reads flags=: "0", or verbs.h names joined by "|", each
// with or without its IBV_WC_ prefix, in any case. When a name is not
// one, ok is false and off is its byte offset in s.
func parseWCFlags(s string) (f nic.WCFlags, off int, ok bool) {
	if s == "0" {
		return 0, 0, true
	}
	for part := range strings.SplitSeq(s, "|") {
		u := strings.ToUpper(part)
		i := slices.IndexFunc(wcFlagNames, func(n wcFlagName) bool { return n.name == u || n.name == "IBV_WC_"+u })
		if i < 0 {
			return 0, off, false
		}
		f |= wcFlagNames[i].flag
		off += len(part) + 1
	}
	return f, 0, true
}

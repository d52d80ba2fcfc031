package nic

import (
	"reflect"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocesim/rocesim/sim"
)

// TestPerMessageLayout holds the layout the per-message path's cache
// misses depend on (issue 20; the alltoall at N = 128 under cachegrind):
// TxDone's slot is 8 bytes, so the slots of eight QPs share a line, and
// what the completer reads of a send WQE lies in its first 64 bytes (one
// line where the slot begins one, rather than three to five).
func TestPerMessageLayout(t *testing.T) {
	assert.LessOrEqual(t, unsafe.Sizeof(txSlot{}), uintptr(8), "txSlot")
	// A one-slot send queue's storage begins a line: at most 256 bytes
	// (no header before it), and a whole number of lines (a size class
	// of its own, so each slot of a span begins a line).
	if s := unsafe.Sizeof(sendWQE{}); s > 256 || s%64 != 0 {
		t.Errorf("sendWQE is %d bytes: a one-slot send queue would not begin a cache line", s)
	}
	var w sendWQE
	wr := unsafe.Offsetof(w.wr)
	for name, end := range map[string]uintptr{
		"length":    unsafe.Offsetof(w.length) + unsafe.Sizeof(w.length),
		"firstPSN":  unsafe.Offsetof(w.firstPSN) + unsafe.Sizeof(w.firstPSN),
		"npkts":     unsafe.Offsetof(w.npkts) + unsafe.Sizeof(w.npkts),
		"signaled":  unsafe.Offsetof(w.signaled) + 1,
		"done":      unsafe.Offsetof(w.done) + 1,
		"status":    unsafe.Offsetof(w.status) + unsafe.Sizeof(w.status),
		"wr.WRID":   wr + unsafe.Offsetof(w.wr.WRID) + unsafe.Sizeof(w.wr.WRID),
		"wr.Opcode": wr + unsafe.Offsetof(w.wr.Opcode) + unsafe.Sizeof(w.wr.Opcode),
	} {
		assert.LessOrEqual(t, end, uintptr(64), "sendWQE.%s ends at byte %d", name, end)
	}
}

// TestRetryBudgetCopies: the requester's copies of retry_cnt, rnr_retry
// and timeout follow the attributes: set by modify_qp, reloaded into the
// budgets, used for the ACK timeout, and cleared with them by RESET.
func TestRetryBudgetCopies(t *testing.T) {
	d, pd, cq := resDevice(t)
	qp := timerQP(t, d, pd, cq) // RTS with timeout 14, retry_cnt 7, rnr_retry 7
	r := &qp.req
	assert.Equal(t, [3]uint8{7, 7, 14}, [3]uint8{r.retryCnt, r.rnrRetry, r.timeout})
	_, err := d.PostSend(0, qp, []SendWR{{WRID: 1, Opcode: WRSend}})
	require.NoError(t, err)
	d.Ready()
	assert.Equal(t, sim.Time(0).Add(d.cfg.Profile.ACKTimeout(14)), r.ackDue, "the ACK timer armed with the QP's timeout")
	r.retries, r.rnrRetries = 0, 0
	d.resetRetries(qp)
	assert.Equal(t, [2]int{7, 7}, [2]int{r.retries, r.rnrRetries}, "budgets reloaded from the copies")

	require.NoError(t, d.ModifyQP(0, qp, &QPAttr{QPState: QPStateReset}, QPAttrState))
	assert.Equal(t, [3]uint8{0, 0, 0}, [3]uint8{r.retryCnt, r.rnrRetry, r.timeout})
	a, _ := qp.Query()
	assert.Equal(t, [3]uint8{0, 0, 0}, [3]uint8{a.RetryCnt, a.RNRRetry, a.Timeout})
}

// TestQPLinesPerMessage counts the cache lines of a QP, where the
// allocator put it, that the fields a message reads on each side span:
// seven for the sender (post, send, completion: eight before the fields
// were laid out by line, six before every frame carried its receiver's
// hint, on the receiver's line) and five for the receiver of a WRITE,
// which a hinted frame's receiver has asked for before it arrives. The plan
// (see QP) counts on the Go runtime's 8-byte header before an object of
// over 512 bytes with pointers; if that changes, this says so.
func TestQPLinesPerMessage(t *testing.T) {
	d, pd, cq := resDevice(t)
	qp := resQP(t, d, pd, cq)
	base := uintptr(unsafe.Pointer(qp))
	lines := func(spans ...[2]uintptr) int {
		seen := map[uintptr]bool{}
		for _, s := range spans {
			for b := base + s[0]; b < base+s[0]+s[1]; b++ {
				seen[b/64] = true
			}
		}
		return len(seen)
	}
	field := func(off, size uintptr) [2]uintptr { return [2]uintptr{off, size} }
	var a QPAttr
	header := field(0, unsafe.Offsetof(qp.txBuilt)+8) // dev … txBuilt
	typ := field(unsafe.Offsetof(qp.init)+unsafe.Offsetof(qp.init.Type), 1)
	mtu := field(unsafe.Offsetof(qp.attr)+unsafe.Offsetof(a.PathMTU), 1)
	dqpn := field(unsafe.Offsetof(qp.attr)+unsafe.Offsetof(a.DestQPNum), 8) // and the access flags
	grh := field(unsafe.Offsetof(qp.attr)+unsafe.Offsetof(a.AHAttr), unsafe.Sizeof(a.AHAttr.GRH))
	peer := field(unsafe.Offsetof(qp.peer), unsafe.Sizeof(qp.peer)) // every frame's hint
	sender := lines(header, typ, mtu, dqpn, grh, peer,
		field(unsafe.Offsetof(qp.init), unsafe.Sizeof(qp.init)),
		field(unsafe.Offsetof(qp.sq), unsafe.Sizeof(qp.sq)),
		field(unsafe.Offsetof(qp.req), unsafe.Sizeof(qp.req)))
	receiver := lines(header, typ, mtu, dqpn, grh, peer,
		field(unsafe.Offsetof(qp.pd), 8),
		field(unsafe.Offsetof(qp.resp), unsafe.Sizeof(qp.resp)))
	assert.Equal(t, 7, sender, "QP lines a sent message reads (QP at %#x)", base)
	assert.Equal(t, 5, receiver, "QP lines a received WRITE reads (QP at %#x)", base)
}

// TestOneSlotQueueBeginsLine: the storage a max_send_wr 1 QP's first post
// gives its send queue begins a cache line, so the completer reads one
// line of the WQE, however many QPs came before (the alltoall's million
// QPs each post one WRITE, and each WQE is cold when its ACK comes).
func TestOneSlotQueueBeginsLine(t *testing.T) {
	d, pd, cq := resDevice(t)
	for i := range 8 {
		qp := timerQP(t, d, pd, cq) // max_send_wr 1, RTS
		_, err := d.PostSend(0, qp, []SendWR{{WRID: 1, Opcode: WRSend}})
		require.NoError(t, err)
		require.Len(t, qp.sq.slots, 1)
		assert.Zero(t, uintptr(unsafe.Pointer(&qp.sq.slots[0]))%64, "QP %d: its WQE begins %d bytes into a line", i, uintptr(unsafe.Pointer(&qp.sq.slots[0]))%64)
	}
}

// TestDeviceHotFieldsFirst: what a frame reads or writes of its device
// comes before everything else (see Device), within the first 1,152
// bytes, so that a device gone cold costs a frame as few lines as those
// fields fill. Every field is placed: one added to the device must be
// named here as a frame's or go after attr with the verbs' and rarer
// paths' fields.
func TestDeviceHotFieldsFirst(t *testing.T) {
	frames := map[string]bool{"cfg": true, "qps": true, "mem": true, "timers": true, "outbox": true, "counters": true,
		"inflight": true, "tx": true, "txQP": true, "txFree": true, "rxRecent": true, "ipID": true, "portDown": true,
		"trace": true, "noteBuf": true}
	var d Device
	cold := unsafe.Offsetof(d.attr)
	assert.LessOrEqual(t, cold, uintptr(1152), "the frame's fields of a device end at byte %d", cold)
	ty := reflect.TypeOf(d)
	for i := range ty.NumField() {
		f := ty.Field(i)
		if frames[f.Name] {
			assert.Less(t, f.Offset, cold, "Device.%s, which frames use, is after attr", f.Name)
		} else {
			assert.GreaterOrEqual(t, f.Offset, cold, "Device.%s is among the frame's fields but not named in this test", f.Name)
		}
	}
	assert.Equal(t, unsafe.Offsetof(d.mem.slots)+unsafe.Sizeof(d.mem.slots), unsafe.Offsetof(d.mem.stream), "memTable.stream beside slots")
}

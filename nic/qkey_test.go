package nic_test

import (
	"testing"

	"github.com/rocesim/rocesim/nic"
)

// TestUDControlledQKey: a UD send whose work request names a Q_Key with
// the high-order bit set carries the sending QP's own Q_Key instead
// (IBTA vol. 1 §10.2.4, controlled Q_Keys; rxe's init_req_packet:
// remote_qkey & 0x80000000 ? qp->attr.qkey : remote_qkey). Both QPs of the
// pair have Q_Key 0x1234, so that datagram is received; one naming
// another Q_Key is dropped by the receiver and counted (rxe's check_keys,
// the port's qkey_viol_cntr), and its receive stays posted.
func TestUDControlledQKey(t *testing.T) {
	for _, c := range []struct {
		name  string
		qkey  uint32
		recv  string
		drops uint64
	}{
		{"controlled", 0x80000000, "wc id=100 IBV_WC_RECV success len=50\nstate RTS", 0},
		{"own", pairQKey, "wc id=100 IBV_WC_RECV success len=50\nstate RTS", 0},
		{"other", 0x5678, "state RTS", 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newPair(t, args{"type": "ud"})
			if got := h.run(t, "recv b len=4096"); got != "ok" {
				t.Fatal(got)
			}
			wr := nic.SendWR{WRID: 1, Opcode: nic.WRSend, Flags: nic.SendSignaled,
				SGList: []nic.SGE{{Addr: h.a.mr.Addr, Length: 10, LKey: h.a.mr.LKey}},
				AH:     h.a.ah, RemoteQPN: h.b.qp.Num(), RemoteQKey: c.qkey}
			if _, err := h.a.dev.PostSend(h.now, h.a.qp, []nic.SendWR{wr}); err != nil {
				t.Fatal(err)
			}
			if got, want := h.run(t, "deliver"), "1 a->b UD_SEND_ONLY psn=0 len=10"; got != want {
				t.Errorf("deliver: got %q, want %q", got, want)
			}
			if got := h.run(t, "poll b"); got != c.recv {
				t.Errorf("poll b:\n%s\nwant:\n%s", got, c.recv)
			}
			if got := h.b.dev.QKeyDrops(); got != c.drops {
				t.Errorf("b's Q_Key drops: %d, want %d", got, c.drops)
			}
		})
	}
}

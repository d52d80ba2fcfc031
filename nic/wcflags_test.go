package nic_test

import (
	"testing"

	"github.com/rocesim/rocesim/nic"
)

// TestReceiveWCFlags checks the wc_flags of receive completions, and of
// the send completions beside them, under each profile. rxe_resp.c do_complete starts a user CQE's flags at IB_WC_GRH
// on every QP type and adds the kernel's IB_WC_WITH_INVALIDATE (1<<2) for
// an IETH, which libibverbs reads as IBV_WC_IP_CSUM_OK; ProfileSpec sets
// what libibverbs means: IBV_WC_WITH_INV (1<<3), GRH on UD only. The
// interaction scripts print only the invalidation's bit, so the whole
// word is checked here. On the send side rxe_comp.c make_send_cqe sets
// IB_WC_WITH_IMM for SEND and WRITE with immediate.
func TestReceiveWCFlags(t *testing.T) {
	for _, c := range []struct {
		profile, op string
		want, send  nic.WCFlags
	}{
		{"rxe", "send", nic.WCFlagGRH, 0},
		{"rxe", "send-imm", nic.WCFlagGRH | nic.WCFlagWithImm, nic.WCFlagWithImm},
		{"rxe", "write-imm", nic.WCFlagGRH | nic.WCFlagWithImm, nic.WCFlagWithImm},
		{"rxe", "send-inv", nic.WCFlagGRH | nic.WCFlagIPCSumOK, 0},
		{"spec", "send", 0, 0},
		{"spec", "send-imm", nic.WCFlagWithImm, 0},
		{"spec", "write-imm", nic.WCFlagWithImm, 0},
		{"spec", "send-inv", nic.WCFlagWithInv, 0},
	} {
		t.Run(c.profile+"/"+c.op, func(t *testing.T) {
			h := newPair(t, args{"type": "rc", "profile": c.profile})
			a, b := h.side(t, "a"), h.side(t, "b")
			for _, cmd := range []string{"post b bind id=50", "recv b len=64 n=1", "post a " + c.op + " len=10 id=2", "deliver"} {
				h.run(t, cmd)
			}
			wcs := make([]nic.WC, 4)
			n := b.cq.Poll(wcs)
			var got *nic.WC
			for i := range wcs[:n] {
				if wcs[i].Opcode&nic.WCRecv != 0 {
					got = &wcs[i]
				}
			}
			if got == nil || got.Status != nic.WCSuccess {
				t.Fatalf("no successful receive completion in %+v", wcs[:n])
			}
			if got.WCFlags != c.want {
				t.Errorf("wc_flags %#x, want %#x", got.WCFlags, c.want)
			}
			n = a.cq.Poll(wcs)
			if n != 1 || wcs[0].Status != nic.WCSuccess {
				t.Fatalf("send completions %+v, want one successful", wcs[:n])
			}
			if wcs[0].WCFlags != c.send {
				t.Errorf("send-side wc_flags %#x, want %#x", wcs[0].WCFlags, c.send)
			}
			if inv := c.op == "send-inv"; got.Invalidated() != inv {
				t.Errorf("Invalidated() = %v, want %v", got.Invalidated(), inv)
			}
		})
	}
}

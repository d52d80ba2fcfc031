package verbs_test

import (
	"fmt"
	"testing"

	"github.com/rocesim/rocesim/verbs"
)

// BenchmarkConnectRCPairs creates n RC QP pairs between two hosts, each
// QP with a 64-byte MR of its own, and takes both sides through INIT,
// RTR and RTS (issue 20 item 2: set-up in O(1) per resource), up to
// 65,536 pairs, below rxe's max_qp of 1,048,560 per device. One op
// is the whole set-up of n pairs in a fresh world; ns/pair must stay flat
// as n grows.
func BenchmarkConnectRCPairs(b *testing.B) {
	for _, n := range []int{1000, 20000, 65536} {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for range b.N {
				connectPairs(b, n)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/pair")
		})
	}
}

// connectPairs builds a two-host world and connects n RC QP pairs in it.
func connectPairs(b *testing.B, n int) {
	w := verbs.NewWorld(verbs.WorldConfig{Seed: 1})
	ha, hb := w.AddHost("a"), w.AddHost("b")
	if err := w.Connect(ha, hb); err != nil {
		b.Fatal(err)
	}
	a, c := setup(ha, 1), setup(hb, 2)
	for i := range n {
		qa, qb := *a, *c
		for _, e := range []*endpoint{&qa, &qb} {
			var err error
			e.buf = make([]byte, 64)
			if e.mr, err = e.pd.RegMR(e.buf, verbs.AccessLocalWrite|verbs.AccessRemoteWrite); err != nil {
				b.Fatalf("pair %d: reg_mr: %v", i, err)
			}
			if e.qp, err = e.pd.CreateQP(verbs.QPInitAttr{SendCQ: e.cq, RecvCQ: e.cq, Type: verbs.QPTypeRC,
				Cap: verbs.QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1}}); err != nil {
				b.Fatalf("pair %d: create_qp: %v", i, err)
			}
		}
		if err := qa.connect(&qb); err != nil {
			b.Fatalf("pair %d: %v", i, err)
		}
		if err := qb.connect(&qa); err != nil {
			b.Fatalf("pair %d: %v", i, err)
		}
	}
}

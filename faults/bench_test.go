package faults_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rocesim/rocesim/faults"
	"github.com/rocesim/rocesim/wire"
)

// tenRules is a plan of ten rules, none of which matches benchFrame on
// benchHop, so Decide tries every one of them.
const tenRules = `
drop psn=2 tx=1
delay 50us class=ack prob=0.1
dup n=2 dir=b->a
reorder n=3 qp=0x99
corrupt class=atomic nth=3
truncate cut=4 op=RC_RDMA_WRITE_ONLY
rewrite set-syndrome=nak-seq class=ack first=1
drop link=sw-b psn=100-200
down link=x-y from=1ms to=2ms
partition a|c from=0 to=5ms
`

var benchHop = faults.Hop{Link: "a-sw", From: "a", To: "b", First: true, Tx: 1}

func benchSetup(tb testing.TB) (*faults.Injector, []byte, *wire.Packet) {
	in := faults.NewInjector(mustParse(tb, tenRules), newRand(1))
	frame := pktSpec{op: wire.OpRCSendOnly, psn: 7, qp: 0x11}.build(tb)
	return in, frame, decode(tb, frame)
}

// BenchmarkDecideNoMatch: the per-frame cost of a 10-rule plan on a frame
// no rule touches.
func BenchmarkDecideNoMatch(b *testing.B) {
	in, frame, pkt := benchSetup(b)
	b.ReportAllocs()
	for b.Loop() {
		if v := in.Decide(1000, benchHop, frame, pkt); v.Action != faults.Pass {
			b.Fatal(v)
		}
	}
}

// BenchmarkCountTx: numbering the transmissions of an in-order stream.
func BenchmarkCountTx(b *testing.B) {
	in, frame, pkt := benchSetup(b)
	_ = frame
	b.ReportAllocs()
	psn := wire.PSN(0)
	for b.Loop() {
		pkt.BTH.SetPSN(psn)
		psn = psn.Next()
		in.CountTx(benchHop, pkt)
	}
}

// TestDecideAllocs: Decide allocates nothing when no rule acts, nor when
// one drops, delays or rewrites.
func TestDecideAllocs(t *testing.T) {
	in, frame, pkt := benchSetup(t)
	require.Zero(t, testing.AllocsPerRun(100, func() { in.Decide(1000, benchHop, frame, pkt) }))
	for _, plan := range []string{"drop", "delay 5us class=request", "rewrite set-psn=+1", "corrupt prob=0.5",
		"rewrite set-qp=+1 set-pad=1 set-ecn=ce", "truncate cut=4", "down link=a-sw after=1"} {
		in := faults.NewInjector(mustParse(t, plan), newRand(1))
		require.Zero(t, testing.AllocsPerRun(100, func() { in.Decide(1000, benchHop, frame, pkt) }), plan)
	}
}

package ladder_test

import (
	"io"
	"testing"

	"github.com/rocesim/rocesim/ladder"
)

// benchAlltoall: four hosts through a switch, every host sending 16 KiB
// to every other, a request now and then lost (about 670 events).
var benchAlltoall = scenario{hosts: 4, sw: true, size: 16384, plan: "drop class=request prob=0.01"}

func BenchmarkText(b *testing.B) {
	tr := run(b, benchAlltoall)
	b.ReportAllocs()
	for b.Loop() {
		if err := ladder.Text(io.Discard, tr, ladder.Options{}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(tr.Events())), "events")
}

func BenchmarkSVG(b *testing.B) {
	tr := run(b, benchAlltoall)
	b.ReportAllocs()
	for b.Loop() {
		if err := ladder.SVG(io.Discard, tr, ladder.Options{}, "alltoall"); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(tr.Events())), "events")
}

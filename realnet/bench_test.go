//go:build linux

package realnet_test

import (
	"net/netip"
	"strconv"
	"testing"

	"github.com/rocesim/rocesim/realnet"
)

// BenchmarkUDPWorkload runs the scripted workload between two model
// nodes over real UDP on loopback (127.0.0.1 and 127.0.0.2, port 4791),
// b.N operations of each kind at 4 KiB and 64 KiB, and reports the
// throughput and the mean latency (16 operations outstanding) the client
// measured:
//
//	go test -run '^$' -bench UDPWorkload ./realnet/
func BenchmarkUDPWorkload(b *testing.B) {
	for _, size := range []int{4096, 65536} {
		for _, op := range []string{"send", "write", "read"} {
			b.Run(op+"/"+byteSize(size), func(b *testing.B) {
				benchWorkload(b, realnet.Workload{Op: op, Size: size, Iters: b.N})
			})
		}
	}
}

// byteSize names a size for a benchmark.
func byteSize(n int) string {
	if n%1024 == 0 {
		return strconv.Itoa(n/1024) + "KiB"
	}
	return strconv.Itoa(n) + "B"
}

// benchWorkload runs w between two fresh nodes.
func benchWorkload(b *testing.B, w realnet.Workload) {
	c, err := realnet.NewNode(realnet.NodeConfig{Name: "client", Addr: netip.MustParseAddr("127.0.0.1")})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	s, err := realnet.NewNode(realnet.NodeConfig{Name: "server", Addr: netip.MustParseAddr("127.0.0.2")})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	b.ResetTimer()
	res, _, err := runPair(10*wallBound, c, s, w)
	b.StopTimer()
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(w.Size))
	b.ReportMetric(float64(res.Latency.Microseconds()), "µs-latency")
}

package verbs_test

import (
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocesim/rocesim/verbs"
	"github.com/rocesim/rocesim/verbs/verbstest"
)

// TestHostAddrOf: hosts 1 to 254 keep the one-byte numbers every golden
// was made with; past them the index carries into the next bytes instead
// of wrapping onto host 1's addresses.
func TestHostAddrOf(t *testing.T) {
	for _, c := range []struct {
		i           int
		mac, v4, v6 string
	}{
		{1, "02:00:00:00:00:01", "10.0.0.1", "fd00::1"},
		{2, "02:00:00:00:00:02", "10.0.0.2", "fd00::2"},
		{254, "02:00:00:00:00:fe", "10.0.0.254", "fd00::fe"},
		{255, "02:00:00:00:00:ff", "10.0.0.255", "fd00::ff"},
		{256, "02:00:00:00:01:00", "10.0.1.0", "fd00::100"},
		{257, "02:00:00:00:01:01", "10.0.1.1", "fd00::101"},
		{1024, "02:00:00:00:04:00", "10.0.4.0", "fd00::400"},
		{verbs.MaxHosts, "02:00:00:ff:ff:ff", "10.255.255.255", "fd00::ff:ffff"},
	} {
		a := verbs.HostAddrOf(c.i)
		assert.Equal(t, c.mac, a.MAC.String(), "host %d", c.i)
		assert.Equal(t, c.v4, a.IPv4.String(), "host %d", c.i)
		assert.Equal(t, c.v6, a.IPv6.String(), "host %d", c.i)
	}
	assert.Panics(t, func() { verbs.HostAddrOf(0) })
	assert.Panics(t, func() { verbs.HostAddrOf(verbs.MaxHosts + 1) })
}

// TestThousandHostsOnASwitch: 1024 hosts on one switch, each of hosts 2
// to 1024 sends host 1 an RC SEND carrying its number, and host 1024
// also sends one to host 300: with one-byte host numbers host 257 took
// host 1's MAC and IP, and these SENDs went astray.
func TestThousandHostsOnASwitch(t *testing.T) {
	if testing.Short() {
		t.Skip("1024 hosts: not in -short")
	}
	const n = 1024
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("h%d", i+1)
	}
	w := verbstest.New(t, verbstest.Options{Nodes: names, Switch: true, MaxEvents: 10_000_000})
	type flow struct {
		from, to int
		a, b     *verbstest.Endpoint
		dst      *verbs.MR
	}
	var flows []*flow
	for i := 2; i <= n; i++ {
		flows = append(flows, &flow{from: i, to: 1})
	}
	flows = append(flows, &flow{from: n, to: 300})
	for _, f := range flows {
		f.a, f.b = w.Pair(names[f.from-1], names[f.to-1], verbstest.QPOptions{Depth: 1, MaxInline: 8})
		f.dst = f.b.Host.Buffer(8)
		_, err := f.b.QP.PostRecv([]verbs.RecvWR{{WRID: 1, SGList: []verbs.SGE{f.dst.SGE(0, 8)}}})
		require.NoError(t, err)
		var msg [8]byte
		binary.BigEndian.PutUint32(msg[:], uint32(f.from))
		binary.BigEndian.PutUint32(msg[4:], uint32(f.to))
		src := f.a.Host.Buffer(8)
		copy(src.Bytes(), msg[:])
		_, err = f.a.QP.PostSend([]verbs.SendWR{{WRID: 2, Opcode: verbs.WRSend, Flags: verbs.SendSignaled | verbs.SendInline,
			SGList: []verbs.SGE{src.SGE(0, 8)}}})
		require.NoError(t, err)
	}
	var wc [1]verbs.WC
	done := make([]int, len(flows)) // completions seen per flow: send and receive
	left := 2 * len(flows)
	w.RunUntil("every SEND and its receive completed", func() bool {
		for k, f := range flows {
			for _, cq := range []*verbs.CQ{f.a.CQ, f.b.CQ} {
				if cq.Poll(wc[:]) == 1 {
					require.Equal(t, verbs.WCSuccess, wc[0].Status, "h%d->h%d: %v", f.from, f.to, wc[0].Status.Name())
					done[k]++
					left--
				}
			}
		}
		return left == 0
	})
	for _, f := range flows {
		got := f.dst.Bytes()
		assert.Equal(t, []uint32{uint32(f.from), uint32(f.to)},
			[]uint32{binary.BigEndian.Uint32(got), binary.BigEndian.Uint32(got[4:])}, "h%d->h%d", f.from, f.to)
	}
}

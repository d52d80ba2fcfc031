package conformance

import (
	"os"
	"testing"
	"time"

	"github.com/rocesim/rocesim/scenario"
)

func TestLongestWait(t *testing.T) {
	prev := []threadDelay{{key: "1/1", who: "VM a", delay: 100}, {key: "1/2", who: "VM a", delay: 5e6}, {key: "2/7", who: "VM b", delay: 0}}
	cur := []threadDelay{{key: "1/1", who: "VM a", delay: 2e6}, {key: "1/2", who: "VM a", delay: 5e6}, {key: "2/7", who: "VM b", delay: 83e6}, {key: "2/9", who: "VM b", delay: 9e9}}
	d, who := longestWait(prev, cur)
	// 2/9 is new (no earlier sample): its whole past is not one wait.
	if d != 83*time.Millisecond || who != "VM b" {
		t.Errorf("longestWait = %v %q, want 83ms VM b", d, who)
	}
	if d, who := longestWait(cur, cur); d != 0 || who != "" {
		t.Errorf("no growth: %v %q", d, who)
	}
	for s, want := range map[string]uint64{"5468439190 173715357903 12242\n": 173715357903, "1 2": 2} {
		if v, ok := parseSchedstat(s); !ok || v != want {
			t.Errorf("parseSchedstat(%q) = %d %v", s, v, ok)
		}
	}
	if _, ok := parseSchedstat("12"); ok {
		t.Error("parseSchedstat of one field succeeded")
	}
}

// TestCPUWaitMeterSeesThisProcess: the meter reads this process's own
// threads (on a host with schedstat) and stops.
func TestCPUWaitMeterSeesThisProcess(t *testing.T) {
	if _, err := os.Stat("/proc/self/schedstat"); err != nil {
		t.Skip("no schedstat on this host")
	}
	m := startCPUWaitMeter(meteredProc{pid: os.Getpid(), who: "test"})
	w := m.Stop()
	if !w.Known {
		t.Errorf("meter of this process: %v", w)
	}
	if w := startCPUWaitMeter(meteredProc{pid: os.Getpid(), tids: []int{gettid()}, who: "test"}).Stop(); !w.Known {
		t.Errorf("meter of one thread: %v", w)
	}
	if w := startCPUWaitMeter(meteredProc{pid: os.Getpid(), tids: []int{}, who: "test"}).Stop(); w.Known {
		t.Errorf("meter of no thread says %v", w)
	}
	if w := startCPUWaitMeter(meteredProc{pid: -1, who: "none"}).Stop(); w.Known {
		t.Errorf("meter of no process says %v", w)
	}
}

func TestStallLimit(t *testing.T) {
	for _, c := range []struct {
		qps  string
		want time.Duration
	}{
		{"qp a.q rc peer=b.q timeout=14\nqp b.q rc timeout=18\n", 4096 * time.Nanosecond << 14 / 4},
		{"qp a.q rc peer=b.q timeout=12\nqp b.q rc timeout=18\n", 4096 * time.Nanosecond << 12 / 4},
		{"qp a.q rc peer=b.q timeout=20\nqp b.q rc timeout=18\n", stallLimitMax},
		{"qp a.q uc peer=b.q\nqp b.q uc\n", stallLimitMax}, // UC arms no ACK timer
		// A burst: two sends by one node at one instant.
		{"qp a.q rc peer=b.q timeout=14\nqp b.q rc\nat 0 a.q send wr=1 op=write len=8\nat 0 a.q send wr=2 op=write len=8\n", burstStallLimit},
		// One message of 200 packets is a burst of its own; so is one of
		// 4 (go-back-n), and one of 2 at a path MTU of 256; one of 1 is not.
		{"qp a.q rc peer=b.q timeout=14\nqp b.q rc\nat 0 a.q send wr=1 op=write len=204800\n", burstStallLimit},
		{"qp a.q rc peer=b.q timeout=14\nqp b.q rc\nat 0 a.q send wr=1 op=send len=4096\n", burstStallLimit},
		{"qp a.q rc peer=b.q timeout=14 mtu=256\nqp b.q rc\nat 0 a.q send wr=1 op=write len=512\n", burstStallLimit},
		{"qp a.q rc peer=b.q timeout=14\nqp b.q rc\nat 0 a.q send wr=1 op=write len=1024\n", 4096 * time.Nanosecond << 14 / 4},
		// Two sends at different instants are no burst.
		{"qp a.q rc peer=b.q timeout=14\nqp b.q rc\nat 0 a.q send wr=1 op=write len=8\nat 1ms a.q send wr=2 op=write len=8\n", 4096 * time.Nanosecond << 14 / 4},
	} {
		s, err := scenario.Parse("t", "scenario t\nnode a b\nlink a b\nmr a.buf size=204800\nmr b.buf size=204800\n"+c.qps)
		if err != nil {
			t.Fatal(err)
		}
		p, err := s.Program()
		if err != nil {
			t.Fatal(err)
		}
		want := c.want
		if got := StallLimit(p); got != want {
			t.Errorf("%q: StallLimit = %v, want %v", c.qps, got, want)
		}
	}
}

func TestVoidRun(t *testing.T) {
	diffs := []Diff{{What: "wire a->b", Detail: "#2: model none, rxe RC_RDMA_WRITE_ONLY psn+0 ackreq"}}
	limit := 16 * time.Millisecond
	long := CPUWait{Known: true, Longest: 80 * time.Millisecond, Who: "VM b"}
	short := CPUWait{Known: true, Longest: 3 * time.Millisecond, Who: "VM b"}
	for _, c := range []struct {
		diffs []Diff
		w     CPUWait
		want  bool
	}{
		{diffs, long, true},
		{nil, long, false},        // a match is a match
		{diffs, short, false},     // not kept waiting: a mismatch
		{diffs, CPUWait{}, false}, // not measured: a mismatch
		{diffs, CPUWait{Known: true, Longest: limit}, true},
	} {
		if got := voidRun(c.diffs, c.w, limit); got != c.want {
			t.Errorf("voidRun(%d diffs, %v) = %v, want %v", len(c.diffs), c.w, got, c.want)
		}
	}
}

package conformance

// How long a real run's processes waited for a CPU. On a busy host the
// guests' QEMUs (and this test process, whose switch forwards every
// frame) can sit on a run queue for tens of milliseconds. The guests'
// clocks keep running meanwhile (TCG follows the host clock), so rxe's
// retransmit timer, armed for 4.096 µs × 2^timeout in whole jiffies
// (64 ms at timeout=14: nic.Profile.ACKTimeout, rxe_req.c update_state), fires before the response that
// was on its way is processed: rxe resends, the simulation, where the
// response takes a microsecond, does not. A run in which that can have
// happened does not witness rxe's behaviour on an idle machine, which is
// what the simulation models; the differential test runs it again
// (voidRun).
//
// The measure: every thread's run_delay in /proc/PID/task/TID/schedstat
// (nanoseconds spent runnable but not running). The scheduler adds a
// wait to run_delay when the wait ends (sched_info_arrive), so a single
// long wait shows up as one jump between two samples; the longest jump
// over the run is at least the longest single wait (it may also sum
// several short waits when the sampler itself was kept off the CPU,
// which errs towards running again, never towards accepting a run).

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rocesim/rocesim/nic"
	"github.com/rocesim/rocesim/scenario"
)

// cpuWaitInterval is how often the meter samples.
const cpuWaitInterval = 5 * time.Millisecond

// CPUWait is the longest wait for a CPU the meter saw in a run.
type CPUWait struct {
	// Known is false when the host gives no schedstat (not Linux, or a
	// kernel without CONFIG_SCHED_INFO): nothing was measured.
	Known bool
	// Longest is the largest growth of one thread's run_delay between two
	// samples.
	Longest time.Duration
	// Who names the process of that thread ("VM a", "the switch").
	Who string
}

// String is "VM a waited 83ms for a CPU" or "not measured".
func (w CPUWait) String() string {
	if !w.Known {
		return "CPU waits not measured (no /proc/PID/task/TID/schedstat)"
	}
	if w.Who == "" {
		return "no wait for a CPU"
	}
	return fmt.Sprintf("%s waited %v for a CPU", w.Who, w.Longest.Round(time.Millisecond))
}

// threadDelay is one thread's run_delay at a sample.
type threadDelay struct {
	key   string // "pid/tid"
	who   string
	delay uint64 // ns
}

// longestWait returns the largest growth of a thread's run_delay from
// prev to cur (both sorted by key), and whose it is; threads in only one
// of them are skipped.
func longestWait(prev, cur []threadDelay) (time.Duration, string) {
	var best time.Duration
	who := ""
	for _, c := range cur {
		i, ok := slices.BinarySearchFunc(prev, c.key, func(t threadDelay, k string) int { return strings.Compare(t.key, k) })
		if !ok || c.delay < prev[i].delay {
			continue
		}
		if d := time.Duration(c.delay - prev[i].delay); d > best {
			best, who = d, c.who
		}
	}
	return best, who
}

// parseSchedstat returns the run_delay (second field) of a schedstat
// line: "on-cpu-ns run-delay-ns timeslices".
func parseSchedstat(s string) (uint64, bool) {
	f := strings.Fields(s)
	if len(f) < 2 {
		return 0, false
	}
	v, err := strconv.ParseUint(f[1], 10, 64)
	return v, err == nil
}

// meteredProc is a process whose threads the meter samples.
type meteredProc struct {
	pid  int
	tids []int // the threads to sample; nil: all of them
	who  string
}

// cpuWaitMeter samples the run_delay of threads of some processes until
// Stop.
type cpuWaitMeter struct {
	procs []meteredProc
	stop  chan struct{}
	done  chan struct{}

	mu   sync.Mutex
	wait CPUWait
}

// sample reads the run_delay of the meter's threads, sorted by key; ok
// is false when none could be read.
func (m *cpuWaitMeter) sample() ([]threadDelay, bool) {
	var out []threadDelay
	for _, p := range m.procs {
		dir := filepath.Join("/proc", strconv.Itoa(p.pid), "task")
		var tids []string
		if p.tids == nil {
			ents, err := os.ReadDir(dir)
			if err != nil {
				continue
			}
			for _, e := range ents {
				tids = append(tids, e.Name())
			}
		}
		for _, t := range p.tids {
			tids = append(tids, strconv.Itoa(t))
		}
		for _, tid := range tids {
			b, err := os.ReadFile(filepath.Join(dir, tid, "schedstat"))
			if err != nil {
				continue // the thread ended
			}
			if d, ok := parseSchedstat(string(b)); ok {
				out = append(out, threadDelay{key: strconv.Itoa(p.pid) + "/" + tid, who: p.who, delay: d})
			}
		}
	}
	slices.SortFunc(out, func(a, b threadDelay) int { return strings.Compare(a.key, b.key) })
	return out, len(out) > 0
}

// startCPUWaitMeter starts sampling the processes' threads every
// cpuWaitInterval.
func startCPUWaitMeter(procs ...meteredProc) *cpuWaitMeter {
	m := &cpuWaitMeter{procs: procs, stop: make(chan struct{}), done: make(chan struct{})}
	prev, ok := m.sample()
	m.wait.Known = ok
	go func() {
		defer close(m.done)
		t := time.NewTicker(cpuWaitInterval)
		defer t.Stop()
		for {
			stopping := false
			select {
			case <-t.C:
			case <-m.stop:
				stopping = true // one last sample: waits that ended since
			}
			cur, ok := m.sample()
			if ok {
				d, who := longestWait(prev, cur)
				m.mu.Lock()
				if d > m.wait.Longest {
					m.wait.Longest, m.wait.Who = d, who
				}
				m.mu.Unlock()
				prev = cur
			}
			if stopping {
				return
			}
		}
	}()
	return m
}

// Stop ends the sampling and returns the longest wait seen.
func (m *cpuWaitMeter) Stop() CPUWait {
	close(m.stop)
	<-m.done
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.wait
}

// stallLimitMax is the stall limit of a scenario whose ACK timers are
// long or absent: still short beside the steps' spacing and the RNR
// timers of the conformance scenarios (a step "at 100ms" before an RNR
// retry 327 ms after the NAK), which a longer wait could reorder.
const stallLimitMax = 20 * time.Millisecond

// StallLimit is the longest wait for a CPU that a real run of p may have
// and still witness rxe on an idle machine: a quarter of the shortest
// local ACK timeout of its RC QPs (4.096 µs × 2^timeout, IBTA vol. 1
// §9.7.6.1.3; 16.8 ms at timeout=14), at most stallLimitMax. rxe waits
// that rounded down to whole jiffies (nic.Profile.ACKTimeout: 64 ms at
// timeout=14), and, armed mid-jiffy, up to a jiffy less. The quarter
// leaves room for the waits the meter cannot see (a guest's own softirq
// backlog, rxe's jiffy rounding) and for waits of both guests adding up
// on one round trip. A low limit costs only reruns of runs that differed
// anyway.
//
// A scenario that posts a burst (two sends or more by one node at one
// instant, or one message of more than one packet) is held to
// burstStallLimit as well: its story assumes the whole burst leaves
// before any answer comes back, and a guest kept off its CPU in the
// middle of the burst for longer than the round trip lets the answers
// overtake the rest (atomic-multi-ack-loss in CI: a 3 ms wait, and rxe
// retried from the first FAA after sending three; go-back-n in CI: a
// 3 ms wait, and the sequence NAK of the lost 2nd packet came back
// before rxe had sent the 4th, so it went back to the 2nd first).
func StallLimit(p *scenario.Program) time.Duration {
	limit := stallLimitMax
	for _, n := range p.Nodes {
		if n.QP.Type != nic.QPTypeRC || n.QP.Timeout == 0 {
			continue
		}
		limit = min(limit, time.Duration(nic.ProfileSpec.ACKTimeout(n.QP.Timeout))/4)
	}
	for i := range p.Steps {
		b := &p.Steps[i]
		if b.Kind != scenario.StepSend {
			continue
		}
		if b.Len > uint64(onePacket(p, b.Node)) {
			return min(limit, burstStallLimit) // one message is a burst too
		}
		if a := &p.Steps[max(i-1, 0)]; i > 0 && a.Kind == scenario.StepSend && a.At == b.At && a.Node == b.Node {
			return min(limit, burstStallLimit)
		}
	}
	return limit
}

// onePacket is the longest message node i sends in one packet: its QP's
// path MTU, or 1024 (the port's active MTU on a link of the default IP
// MTU 1500) where the scenario leaves it to the port. On a link of a
// larger MTU a shorter message counts as a burst too, which costs only
// reruns of runs that differed.
func onePacket(p *scenario.Program, i int) int {
	if i >= 0 && i < len(p.Nodes) && p.Nodes[i].QP.PathMTU > 0 {
		return p.Nodes[i].QP.PathMTU
	}
	return 1024
}

// burstStallLimit bounds the stall limit of a scenario that posts a
// burst: well above the rig's round trip between the guests (hundreds of
// microseconds), well below the waits a busy host imposes (milliseconds).
const burstStallLimit = time.Millisecond

// voidRun reports whether a real run that differed from the simulation
// (diffs) is void, to be run again, rather than a mismatch: only when its
// processes are known to have waited for a CPU at least limit. A run
// that matched is never void, and a difference on a run that was not
// kept waiting is a mismatch at once.
func voidRun(diffs []Diff, w CPUWait, limit time.Duration) bool {
	return len(diffs) > 0 && w.Known && w.Longest >= limit
}

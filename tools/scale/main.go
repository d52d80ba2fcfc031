// Command scale measures how rocesim's cost grows with the size of the
// world (issue 20, `make scale`): the alltoall (one 4 KiB RDMA WRITE per
// ordered pair of N hosts on one switch, every completion and every
// block verified) for N = 16 … 1024, and N idle RC QPs on one host for
// N = 1k … 1M. For each point it prints the wall and CPU time, the
// simulated packets per second, the peak live heap and the peak RSS; then
// the fitted growth exponents, each held to 1.1 but those of wall time
// (reported: on a shared machine they also measure the neighbours), and
// what a dependent load to memory costs on this machine at a few
// working-set sizes (latency.go; -latency=false leaves it out). -svg
// draws the curves, -md prints the table in the README's form.
//
// Each point runs in a child process of its own (the same binary with
// -point), so that its peak RSS is its own and a point that runs away is
// bounded (-timeout, GOMEMLIMIT), three times (-runs), of which the run
// of median wall time is the one printed: on a shared machine the
// neighbours move a single run by a third either way. The runs go in
// rounds, every point once and then every point again, so that each
// point's runs meet the machine at the same moments as the others'
// (rounds). Each child first
// reserves its heap on transparent huge pages (-hugepages, package
// hugeheap).
package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"os/exec"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/rocesim/rocesim/hugeheap"
)

func main() {
	var (
		point   = flag.String("point", "", "run one point in this process and print it as JSON: alltoall:N, stream:M, switched:M or idle:N")
		ns      = flag.String("n", "16,32,64,128,256,512,1024", "alltoall sizes (hosts)")
		qps     = flag.String("qps", "1000,3162,10000,31623,100000,316228,1000000", "idle QP counts (rxe's max_qp, 1048560, bounds one device)")
		streamM = flag.Int("stream", 100000, "WRITEs of the 2-node stream (0: none)")
		switchM = flag.Int("switched", 100000, "WRITEs of the 2-node stream through one switch (0: none)")
		svg     = flag.String("svg", "", "write the plot to this file")
		md      = flag.Bool("md", false, "print the table as Markdown")
		timeout = flag.Duration("timeout", 15*time.Minute, "wall-time bound of each point")
		memlim  = flag.String("memlimit", "9GiB", "GOMEMLIMIT of each point's process")
		cpuprof = flag.String("cpuprofile", "", "with -point: write a CPU profile of the point here")
		win     = flag.Int("window", 64, "alltoall: WRITEs each host has outstanding at most (the round size)")
		rep     = flag.Int("repeat", 1, "alltoall: run the whole exchange this many times over the same QPs (warm state: the path's own cost per packet)")
		memprof = flag.String("memprofile", "", "with -point: write a heap profile here at the end of the point")
		msg     = flag.Int("msglen", 4096, "bytes of every WRITE of the alltoall and the streams")
		probe   = flag.Bool("latency", true, "print what a dependent load to memory costs at a few working-set sizes")
		nparts  = flag.Int("parts", 1, "alltoall: run it as a verbs.Cluster of this many parts (1: one World)")
		clusN   = flag.String("cluster", "256", "alltoall sizes also run as a cluster of -clusterparts parts (kind cluster; empty: none)")
		clusP   = flag.Int("clusterparts", 2, "parts of the cluster points")
		nwork   = flag.Int("workers", 0, "alltoall with -parts: goroutines that run the parts (0: GOMAXPROCS)")
		gogc    = flag.Int("gogc", 0, "the collector's headroom (debug.SetGCPercent) while a point runs, after a collection of its set-up's garbage (0: the runtime's own, no collection)")
		huge    = flag.Bool("hugepages", true, "reserve each point's heap on transparent huge pages first (package hugeheap)")
		runs    = flag.Int("runs", 3, "run each point this many times and keep the run of median wall time (a shared machine's neighbours move single runs by a third)")
	)
	flag.Parse()
	window, repeat, msgLen = max(1, *win), max(1, *rep), max(1, *msg)
	parts, workers, clusterParts = max(1, *nparts), max(0, *nwork), max(1, *clusP)
	hugePages, gcPercent = *huge, *gogc
	if *point == "latency:1" {
		fmt.Println(latencyLine())
		return
	}
	if *point != "" {
		if hugePages {
			// Without huge pages (a kernel built without them) the
			// point runs on 4 KiB pages, as it would have.
			if _, err := hugeheap.Reserve(heapFor(*point)); err != nil {
				fmt.Fprintln(os.Stderr, "scale: the heap on 4 KiB pages:", err)
			}
		}
		if *cpuprof != "" {
			f, err := os.Create(*cpuprof)
			if err != nil {
				fmt.Fprintln(os.Stderr, "scale:", err)
				os.Exit(1)
			}
			if err := pprof.StartCPUProfile(f); err != nil {
				fmt.Fprintln(os.Stderr, "scale:", err)
				os.Exit(1)
			}
			defer pprof.StopCPUProfile()
		}
		r, err := runPoint(*point)
		if err != nil {
			pprof.StopCPUProfile()
			fmt.Fprintln(os.Stderr, "scale:", err)
			os.Exit(1)
		}
		if *memprof != "" {
			// A heap profile holds what the last GC published: one
			// now puts the run's own allocations in it.
			runtime.GC()
			if f, err := os.Create(*memprof); err == nil {
				_ = pprof.WriteHeapProfile(f)
				f.Close()
			}
		}
		_ = json.NewEncoder(os.Stdout).Encode(r)
		return
	}
	var pts []string
	if *streamM > 0 {
		pts = append(pts, "stream:"+strconv.Itoa(*streamM))
	}
	if *switchM > 0 {
		pts = append(pts, "switched:"+strconv.Itoa(*switchM))
	}
	for _, n := range split(*ns) {
		pts = append(pts, "alltoall:"+n)
	}
	for _, n := range split(*clusN) {
		pts = append(pts, "cluster:"+n)
	}
	for _, n := range split(*qps) {
		pts = append(pts, "idle:"+n)
	}
	fmt.Printf("%-9s %8s %10s %10s %9s %9s %9s %12s %14s %10s %10s\n", "kind", "n", "QPs", "packets", "set-up s", "wall s", "CPU s",
		"packets/s", "packets/CPU-s", "heap MB", "RSS MB")
	var rs []Result
	failed := false
	// The table comes once every round has run; each run says so on
	// standard error as it ends, so a long make scale shows it is alive.
	done := make([]int, len(pts))
	// The points the last lines compare (the streams, the alltoall at
	// N = 256 in one world and as a cluster) run as many rounds as the
	// short ones: a ratio of two medians of three met the machine's
	// noise twice (eight pairs of single runs put the stream 1.70–2.85x
	// the cluster's rate).
	compared := func(i int) bool {
		kind, arg, _ := strings.Cut(pts[i], ":")
		return kind == "stream" || kind == "switched" || (kind == "alltoall" || kind == "cluster") && arg == "256"
	}
	picked, errs := rounds(len(pts), max(1, *runs), compared, func(i int) (Result, error) {
		r, err := child(pts[i], *timeout, *memlim)
		done[i]++
		if err == nil {
			fmt.Fprintf(os.Stderr, "scale: %s run %d: %.3f s\n", pts[i], done[i], r.WallS)
		}
		return r, err
	})
	for i, p := range pts {
		r, err := picked[i], errs[i]
		if err != nil {
			fmt.Fprintf(os.Stderr, "scale: %s: %v\n", p, err)
			failed = true
			continue
		}
		fmt.Printf("%-9s %8d %10d %10d %9.3f %9.3f %9.3f %12.0f %14.0f %10.1f %10.1f\n", r.Kind, r.N, r.QPs, r.Packets, r.SetupS, r.WallS, r.CPUS,
			r.PktsPerS(), r.PktsPerCPUS(), float64(r.PeakHeap)/1e6, float64(r.RSS)/1e6)
		rs = append(rs, r)
	}
	fits := fitAll(rs)
	for _, f := range fits {
		verdict := "ok"
		switch {
		case f.exp > 1.1 && strings.Contains(f.y, "wall"):
			// Wall time on a shared machine also measures the
			// neighbours: reported, the CPU-time fit is the one held.
			verdict = "over 1.1 (wall time: reported, not held)"
		case f.exp > 1.1:
			verdict = "OVER 1.1"
			failed = true
		}
		fmt.Printf("growth: %s ∝ %s^%.3f (%d points) %s\n", f.y, f.x, f.exp, f.n, verdict)
	}
	if *probe {
		// In a child, as the points are: the 1 GiB walk's memory is its own.
		if out, err := exec.Command(os.Args[0], "-point", "latency:1").Output(); err == nil {
			fmt.Print(string(out))
		} else {
			fmt.Fprintf(os.Stderr, "scale: memory latency: %v\n", err)
		}
	}
	if s, a := find(rs, "stream", 2), find(rs, "alltoall", 256); s != nil && a != nil {
		// Reported, not enforced: the alltoall's cost per packet no
		// longer grows with N, but a packet among 65,280 QPs and 512
		// links costs more than one of a 2-node stream (a deeper event
		// heap, state out of cache).
		fmt.Printf("packets/s: 2-node stream %.0f (%.0f per CPU-s), alltoall N=256 %.0f (%.0f per CPU-s): the stream is %.2fx faster in wall time, %.2fx per CPU-s (target: at most 2x)\n",
			s.PktsPerS(), s.PktsPerCPUS(), a.PktsPerS(), a.PktsPerCPUS(), s.PktsPerS()/a.PktsPerS(), s.PktsPerCPUS()/a.PktsPerCPUS())
	}
	if s, a, c := find(rs, "stream", 2), find(rs, "alltoall", 256), find(rs, "cluster", 256); s != nil && a != nil && c != nil {
		// The same alltoall cut into parts run on every core
		// (verbs.Cluster): its wall time against the one world's, and
		// the stream's against it.
		fmt.Printf("packets/s: alltoall N=256 as a cluster of %d parts on %d cores %.0f (%.0f per CPU-s): %.2fx the one world's rate in wall time; the stream is %.2fx faster in wall time\n",
			c.Parts, runtime.GOMAXPROCS(0), c.PktsPerS(), c.PktsPerCPUS(), c.PktsPerS()/a.PktsPerS(), s.PktsPerS()/c.PktsPerS())
	}
	if s, a := find(rs, "switched", 2), find(rs, "alltoall", 256); s != nil && a != nil {
		// The same comparison with the second hop in both: what is
		// left is the alltoall's own (many QPs, many links, more
		// memory than the caches hold).
		fmt.Printf("packets/s: 2-node stream through a switch %.0f per CPU-s: %.2fx the alltoall N=256's\n",
			s.PktsPerCPUS(), s.PktsPerCPUS()/a.PktsPerCPUS())
	}
	if *md {
		markdown(os.Stdout, rs, fits)
	}
	if *svg != "" {
		var b bytes.Buffer
		plot(&b, rs, fits)
		if err := os.WriteFile(*svg, b.Bytes(), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "scale:", err)
			failed = true
		}
	}
	if failed {
		os.Exit(1)
	}
}

// split parses a comma-separated list.
func split(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// heapFor is how much of its heap point p reserves on transparent huge
// pages (package hugeheap) before it allocates any: the alltoall's state
// is visited once per message among hundreds of megabytes, and on 4 KiB
// pages each visit walks the page tables too (README, "Scale"). The size
// is address space, not memory: the peak live heap with the collector's
// headroom (the table's peak heap is 2–4 KiB per alltoall QP, 0.8 KiB
// per idle QP; the collector lets the heap grow to about twice the live
// one between cycles), at least 64 MiB. At most 4 GiB: until the
// scavenger returns it, the freed block counts against the point's
// memory limit (9 GiB), so at N = 1024 the last of the heap's growth
// lands on 4 KiB pages.
func heapFor(p string) int {
	kind, arg, _ := strings.Cut(p, ":")
	n, _ := strconv.Atoi(arg)
	size := uint64(64 << 20)
	switch kind {
	case "alltoall", "cluster":
		size = max(size, uint64(n)*uint64(max(n-1, 0))*8<<10)
	case "idle":
		size = max(size, uint64(n)*2<<10)
	}
	return int(min(size, 4<<30, uint64(math.MaxInt)))
}

// runPoint runs one point in this process.
func runPoint(p string) (Result, error) {
	kind, arg, _ := strings.Cut(p, ":")
	n, err := strconv.Atoi(arg)
	if err != nil || n < 1 {
		return Result{}, fmt.Errorf("point %q: want kind:N with N >= 1", p)
	}
	switch kind {
	case "alltoall":
		if n < 2 {
			return Result{}, fmt.Errorf("point %q: an alltoall needs 2 hosts or more", p)
		}
		return alltoall(n)
	case "cluster":
		if n < 2 {
			return Result{}, fmt.Errorf("point %q: an alltoall needs 2 hosts or more", p)
		}
		defer func(p int) { parts = p }(parts)
		parts = max(2, clusterParts)
		r, err := alltoall(n)
		r.Kind = "cluster"
		return r, err
	case "stream":
		return stream(n, false)
	case "switched":
		return stream(n, true)
	case "idle":
		return idle(n)
	}
	return Result{}, fmt.Errorf("point %q: kind is alltoall, cluster, stream, switched or idle", p)
}

// child runs point p in a process of its own, within the wall-time bound
// and the memory limit, and adds its peak RSS to the result.
func child(p string, timeout time.Duration, memlim string) (Result, error) {
	exe, err := os.Executable()
	if err != nil {
		return Result{}, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, exe, "-point", p, "-window", strconv.Itoa(window), "-repeat", strconv.Itoa(repeat), "-msglen", strconv.Itoa(msgLen),
		"-parts", strconv.Itoa(parts), "-workers", strconv.Itoa(workers), "-clusterparts", strconv.Itoa(clusterParts),
		"-hugepages="+strconv.FormatBool(hugePages), "-gogc", strconv.Itoa(gcPercent))
	cmd.Env = append(os.Environ(), "GOMEMLIMIT="+memlim)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, os.Stderr
	if err := cmd.Run(); err != nil {
		return Result{}, err
	}
	var r Result
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		return Result{}, fmt.Errorf("child output %q: %w", out.String(), err)
	}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		r.RSS = uint64(ru.Maxrss) * 1024
	}
	return r, nil
}

// rounds runs each of n points k times, in rounds (every point once,
// then every point again), and returns for each the run of median wall
// time (the lower middle one for an even count), or its first error. A
// point whose median after k rounds is under shortPoint, or for which
// more says so, runs 2k rounds more, with the others like it: a short
// point's time is hundredths of a second, which a neighbour's moment on
// the core doubles, and the first time-fit points (N = 32 and 64: 0.04 s
// or 0.09 s from one run to the next) decided the fitted exponent.
//
// In rounds, not each point k times in a row: this shared machine's
// speed drifts over minutes, by a third, and a point's runs taken one
// after another met one moment of it, the next point's another: the
// stream and the cluster at N = 256, whose rates are compared, were
// 2.1x apart in one make scale run and 3.2x in the next.
func rounds(n, k int, more func(i int) bool, run func(i int) (Result, error)) ([]Result, []error) {
	runs, errs := make([][]Result, n), make([]error, n)
	round := func(want func(i int) bool) {
		for i := range n {
			if errs[i] != nil || !want(i) {
				continue
			}
			r, err := run(i)
			if err != nil {
				errs[i] = err
				continue
			}
			runs[i] = append(runs[i], r)
		}
	}
	for range k {
		round(func(int) bool { return true })
	}
	short := make([]bool, n)
	for i := range n {
		short[i] = errs[i] == nil && (medianRun(runs[i]).WallS < shortPoint || more(i))
	}
	for range 2 * k {
		round(func(i int) bool { return short[i] })
	}
	picked := make([]Result, n)
	for i := range n {
		if errs[i] == nil {
			picked[i] = medianRun(runs[i])
		}
	}
	return picked, errs
}

// medianRun is the run of median wall time of rs (the lower middle one
// for an even count).
func medianRun(rs []Result) Result {
	rs = slices.Clone(rs)
	slices.SortStableFunc(rs, func(a, b Result) int { return cmp.Compare(a.WallS, b.WallS) })
	return rs[(len(rs)-1)/2]
}

// shortPoint is the median wall time under which rounds runs a point
// three times as often.
const shortPoint = 0.2

// find returns the result of that kind and size, or nil.
func find(rs []Result, kind string, n int) *Result {
	for i := range rs {
		if rs[i].Kind == kind && rs[i].N == n {
			return &rs[i]
		}
	}
	return nil
}

// fit is a growth exponent: y ∝ x^exp over n points (least squares on
// the logarithms).
type fit struct {
	kind, x, y string
	exp, c     float64 // log y = exp·log x + c
	n          int
}

// fitAll fits wall time against packets for the alltoall, and heap and
// wall time against QPs for the idle QPs.
// minFitSeconds is the shortest time a time fit takes a point at.
const minFitSeconds = 0.02

func fitAll(rs []Result) []fit {
	var out []fit
	add := func(kind, x, y string, fx, fy func(Result) float64) {
		var xs, ys []float64
		// A time under minFitSeconds is mostly the process's start and
		// the clock's grain, not the work: such a point is printed but
		// left out of a time fit (the idle-QP creation's 1,000-QP point
		// takes a millisecond and swung its exponent from 0.98 to 1.13).
		floor := 0.0
		if strings.Contains(y, "time") {
			floor = minFitSeconds
		}
		for _, r := range rs {
			if r.Kind == kind && fx(r) > 0 && fy(r) > floor {
				xs, ys = append(xs, math.Log(fx(r))), append(ys, math.Log(fy(r)))
			}
		}
		if len(xs) < 2 {
			return
		}
		e, c := leastSquares(xs, ys)
		out = append(out, fit{kind: kind, x: x, y: y, exp: e, c: c, n: len(xs)})
	}
	add("alltoall", "packets", "alltoall wall time", func(r Result) float64 { return float64(r.Packets) },
		func(r Result) float64 { return r.WallS })
	add("alltoall", "packets", "alltoall CPU time", func(r Result) float64 { return float64(r.Packets) },
		func(r Result) float64 { return r.CPUS })
	add("alltoall", "QPs", "alltoall set-up wall time", func(r Result) float64 { return float64(r.QPs) },
		func(r Result) float64 { return r.SetupS })
	add("alltoall", "QPs", "alltoall peak heap", func(r Result) float64 { return float64(r.QPs) },
		func(r Result) float64 { return float64(r.PeakHeap) })
	add("idle", "QPs", "idle-QP heap", func(r Result) float64 { return float64(r.QPs) },
		func(r Result) float64 { return float64(r.PeakHeap) })
	add("idle", "QPs", "idle-QP creation CPU time", func(r Result) float64 { return float64(r.QPs) },
		func(r Result) float64 { return r.CPUS })
	return out
}

// leastSquares returns the slope and intercept of the line through the
// points that minimises the squared error.
func leastSquares(xs, ys []float64) (slope, icept float64) {
	var sx, sy, sxx, sxy float64
	n := float64(len(xs))
	for i := range xs {
		sx += xs[i]
		sy += ys[i]
		sxx += xs[i] * xs[i]
		sxy += xs[i] * ys[i]
	}
	slope = (n*sxy - sx*sy) / (n*sxx - sx*sx)
	return slope, (sy - slope*sx) / n
}

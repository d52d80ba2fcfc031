//go:build linux

package conformance

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rocesim/rocesim/nic"
	"github.com/rocesim/rocesim/realnet"
	"github.com/rocesim/rocesim/rswitch"
)

// The figures of `make bench-realnet`: the same workloads between two
// model nodes over real UDP on loopback and between two rxe guests on
// this machine (QEMU under TCG, joined by rocesim switch with no plan),
// printed side by side. Both sides run at path MTU 1024 (the guests' rxe
// on a 1500-byte link), WRITE throughput with 16 operations outstanding
// (perftest's --tx-depth=16, the model workload's default depth) and
// latency with one operation at a time.

// figure is one row: a model workload and the perftest run that measures
// the same between the guests.
type figure struct {
	name  string
	w     realnet.Workload
	bw    bool   // a throughput row (else a latency row)
	guest string // the perftest command, without device, GID and peer
}

var figures = []figure{
	{"WRITE 4 KiB, 16 outstanding", realnet.Workload{Op: "write", Size: 4096, Iters: 2000}, true, "ib_write_bw -s 4096 -n 2000 -t 16"},
	{"WRITE 64 KiB, 16 outstanding", realnet.Workload{Op: "write", Size: 65536, Iters: 500}, true, "ib_write_bw -s 65536 -n 500 -t 16"},
	{"SEND 64 B latency", realnet.Workload{Op: "send", Size: 64, Iters: 1000, Depth: 1}, false, "ib_send_lat -s 64 -n 1000"},
	{"SEND 4 KiB latency", realnet.Workload{Op: "send", Size: 4096, Iters: 1000, Depth: 1}, false, "ib_send_lat -s 4096 -n 1000"},
	{"WRITE 64 B latency", realnet.Workload{Op: "write", Size: 64, Iters: 1000, Depth: 1}, false, "ib_write_lat -s 64 -n 1000"},
	{"WRITE 4 KiB latency", realnet.Workload{Op: "write", Size: 4096, Iters: 1000, Depth: 1}, false, "ib_write_lat -s 4096 -n 1000"},
}

// TestRealnetFigures measures figures (make bench-realnet; not in make
// test: it takes minutes and its numbers are the machine's). Set
// ROCESIM_REALNET_FIGURES=1 to run it.
func TestRealnetFigures(t *testing.T) {
	if os.Getenv("ROCESIM_REALNET_FIGURES") != "1" {
		t.Skip("set ROCESIM_REALNET_FIGURES=1 (make bench-realnet)")
	}
	logs := logDir(t)
	needHarness(t)
	// The model first, while no guest takes the CPUs.
	model := make([]string, len(figures))
	for i, f := range figures {
		res, err := modelFigure(f.w)
		if err != nil {
			t.Fatalf("model, %s: %v", f.name, err)
		}
		t.Logf("model: %v", res)
		if f.bw {
			model[i] = fmt.Sprintf("%.1f MiB/s", float64(res.Size)*float64(res.Iters)/res.Elapsed.Seconds()/(1<<20))
		} else {
			model[i] = fmt.Sprintf("%.1f µs", float64(res.Latency.Nanoseconds())/1e3)
		}
	}
	rxe, out, err := rxeFigures(t, logs)
	if err != nil {
		t.Fatalf("%v\nclient console:\n%s", err, out)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\n%-30s %-26s %s\n", "path MTU 1024", "model<->model (UDP, lo)", "rxe<->rxe (2 TCG guests, rocesim switch)")
	for i, f := range figures {
		fmt.Fprintf(&b, "%-30s %-26s %s\n", f.name, model[i], rxe[i])
	}
	b.WriteString("Throughput: bytes moved over the elapsed time (perftest's BW average, MiB/s).\n" +
		"Latency: round trip; the model's mean time from a post to its completion (one outstanding),\n" +
		"rxe's 2 x perftest's t_avg (ib_send_lat/ib_write_lat report half a ping-pong round).\n")
	t.Log(b.String())
}

// modelFigure runs w between two fresh model nodes on 127.0.0.1 and
// 127.0.0.2 (port 4791), the exchange over an in-memory pipe, within
// five minutes.
func modelFigure(w realnet.Workload) (realnet.Result, error) {
	var res realnet.Result
	var nodes [2]*realnet.Node
	for i, a := range []string{"127.0.0.1", "127.0.0.2"} {
		n, err := realnet.NewNode(realnet.NodeConfig{Name: a, Addr: netip.MustParseAddr(a), PathMTUMax: nic.MTU1024})
		if err != nil {
			return res, err
		}
		defer n.Close()
		nodes[i] = n
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cc, sc := net.Pipe()
	defer cc.Close()
	srv := make(chan error, 1)
	go func() {
		defer sc.Close()
		_, err := realnet.RunServer(ctx, nodes[1], sc)
		srv <- err
	}()
	res, err := realnet.RunClient(ctx, nodes[0], cc, w)
	cc.Close()
	if serr := <-srv; err == nil {
		err = serr
	}
	return res, err
}

// rxeFigures boots two guests joined by rocesim switch and runs each
// figure's perftest between them, the server in guest 10.0.0.1, the
// client in 10.0.0.2 (retrying its connect while the server starts); it
// returns one cell per figure and the client's console.
func rxeFigures(t *testing.T, logs string) ([]string, string, error) {
	ports, err := FreeUDPPorts(2)
	if err != nil {
		return nil, "", err
	}
	sw, err := NewSwitch([2]int{ports[0], ports[1]}, rswitch.Config{})
	if err != nil {
		return nil, "", err
	}
	defer sw.Close()
	var server, client strings.Builder
	for i, f := range figures {
		// -F: no failure on the guest's CPU frequency warning.
		fmt.Fprintf(&server, "%s -F -d rxe0 -x $RXE_GID >/dev/null 2>&1\n", f.guest)
		fmt.Fprintf(&client, "n=0; until %s -F -d rxe0 -x $RXE_GID $rxe_peer >/tmp/fig 2>&1; do n=$((n+1)); [ $n -ge 120 ] && break; sleep 0.5; done\n", f.guest)
		fmt.Fprintf(&client, "echo FIG-BEGIN %d; cat /tmp/fig; echo FIG-END %d\n", i, i)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Minute)
	defer cancel()
	cfgs := []VMConfig{
		{Name: "server", IP: "10.0.0.1", Peer: "10.0.0.2", LocalPort: ports[0], RemotePort: switchPort(sw, 0),
			Cmd: server.String(), LogPath: filepath.Join(logs, "figures-server.log"), Timeout: 20 * time.Minute},
		{Name: "client", IP: "10.0.0.2", Peer: "10.0.0.1", LocalPort: ports[1], RemotePort: switchPort(sw, 1),
			Cmd: client.String(), LogPath: filepath.Join(logs, "figures-client.log"), Timeout: 20 * time.Minute},
	}
	var vms [2]*VM
	for i, cfg := range cfgs {
		if vms[i], err = Boot(ctx, cfg); err != nil {
			return nil, "", err
		}
		defer vms[i].Stop()
	}
	r, err := vms[1].Wait()
	if err != nil {
		return nil, r.Output, err
	}
	t.Logf("switch %+v", sw.Stats())
	cells := make([]string, len(figures))
	for i, f := range figures {
		out := between(r.Output, fmt.Sprintf("FIG-BEGIN %d\n", i), fmt.Sprintf("FIG-END %d", i))
		unit, v, err := perftestFigure(out, f.bw)
		if err != nil {
			return nil, r.Output, fmt.Errorf("%s: %w", f.guest, err)
		}
		if f.bw {
			if unit == "MB/sec" { // perftest's MB is 2^20 bytes, as MiB
				unit = "MiB/sec"
			}
			cells[i] = fmt.Sprintf("%.1f %s", v, strings.Replace(unit, "/sec", "/s", 1))
		} else {
			cells[i] = fmt.Sprintf("%.1f µs (t_avg %.1f)", 2*v, v)
		}
	}
	return cells, r.Output, nil
}

// between returns the text of s after begin and before end ("" if
// either is missing).
func between(s, begin, end string) string {
	i := strings.Index(s, begin)
	if i < 0 {
		return ""
	}
	s = s[i+len(begin):]
	j := strings.Index(s, end)
	if j < 0 {
		return ""
	}
	return s[:j]
}

// perftestFigure reads perftest's result table: the first line after
// the header (which starts with "#bytes") that starts with a number
// (perftest may print a CPU frequency warning between them). For a
// throughput run it returns BW average (the 4th column) and its unit from
// the header; for a latency run t_avg (the 6th column, in µs), after
// checking the header has that column there.
func perftestFigure(out string, bw bool) (unit string, v float64, err error) {
	lines := strings.Split(out, "\n")
	for i, l := range lines {
		h := strings.Fields(l)
		if len(h) == 0 || h[0] != "#bytes" {
			continue
		}
		col, unit := 5, "usec"
		if bw {
			col = 3
			if k := strings.Index(l, "BW average["); k >= 0 {
				unit = strings.TrimSuffix(strings.Fields(l[k+len("BW average["):])[0], "]")
			}
		} else if len(h) <= col || h[col] != "t_avg[usec]" {
			return "", 0, fmt.Errorf("latency header %q has no t_avg[usec] in column %d", l, col+1)
		}
		for _, dl := range lines[i+1:] {
			d := strings.Fields(dl)
			if len(d) == 0 {
				continue
			}
			if _, err := strconv.Atoi(d[0]); err != nil {
				continue
			}
			if len(d) <= col {
				return "", 0, fmt.Errorf("result line %q has no column %d", dl, col+1)
			}
			v, err := strconv.ParseFloat(d[col], 64)
			return unit, v, err
		}
	}
	return "", 0, fmt.Errorf("no #bytes table in perftest's output:\n%s", out)
}

// TestPerftestFigure reads the tables of ib_write_bw and ib_send_lat as
// perftest 4.5 prints them, a CPU frequency warning in between.
func TestPerftestFigure(t *testing.T) {
	bw := ` #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]
 Conflicting CPU frequency values detected: 1496.133000 != 1529.788000. CPU Frequency is not max.
 4096       2000             9.05               8.23   		   0.002107
`
	lat := ` #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec] 
 64      1000          612.11         8117.05      950.52             1027.50        480.10          3001.22                  8117.05
`
	for _, c := range []struct {
		out  string
		bw   bool
		unit string
		v    float64
	}{{bw, true, "MB/sec", 8.23}, {lat, false, "usec", 1027.5}} {
		unit, v, err := perftestFigure(c.out, c.bw)
		if err != nil || unit != c.unit || v != c.v {
			t.Errorf("perftestFigure = %q, %v, %v; want %q, %v", unit, v, err, c.unit, c.v)
		}
	}
	if _, _, err := perftestFigure("Couldn't connect to 10.0.0.1:18515\n", true); err == nil {
		t.Error("no table, no error")
	}
}

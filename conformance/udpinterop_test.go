//go:build linux

package conformance

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rocesim/rocesim/internal/dropinbuild"
	"github.com/rocesim/rocesim/internal/netnstest"
	"github.com/rocesim/rocesim/nic"
	"github.com/rocesim/rocesim/realnet"
	"github.com/rocesim/rocesim/rswitch"
)

// TestInteropUDP runs the model over realnet's UDP transport, as a
// program on a host would, against real rxe in a guest. The guest's link
// has no IP path to the host (and a NAT would rewrite addresses the ICRC
// covers), so the model runs in a network namespace with 10.0.0.2/24 on a
// veth, and rocesim switch joins the veth's outer end (AF_PACKET) to the
// guest's datagram link: one Ethernet segment with real addresses, the
// kernel doing ARP, IP and UDP on the model's side. It runs the interop
// matrix (runMatrix: SEND, SEND_WITH_IMM, RDMA_WRITE,
// RDMA_WRITE_WITH_IMM, RDMA_READ, ATOMIC_CMP_AND_SWP and
// ATOMIC_FETCH_AND_ADD, 0 B to 64 KiB, atomics 8 B) in both directions,
// then SEND_WITH_INV (runSendInv): data checked where it landed,
// immediates, invalidated R_Keys and atomics' original values checked on
// both sides, and the completions of rxe and the model in the same role
// compared. The model receives rxe's IPv4 IDs through a socket that does
// not report them, so it recovers them from the ICRC (RecoverIPv4ID).
//
// It needs root (namespace, veth, AF_PACKET); without, it skips, and
// under CI=true fails saying so.
func TestInteropUDP(t *testing.T) {
	logs := needNetns(t)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()

	ns, ports, a, p, sw := udpRig(t, "m", filepath.Join(logs, "interop-udp.pcapng"))
	vm, err := Boot(ctx, VMConfig{Name: "rxe", IP: "10.0.0.1", Peer: "10.0.0.2", LocalPort: ports[0],
		RemotePort: int(a.LocalAddr().Port()), Cmd: AgentLoop, Interactive: true, Timeout: 10 * time.Minute,
		LogPath: filepath.Join(logs, "rxe.log")})
	if err != nil {
		t.Fatal(err)
	}
	defer vm.Stop()
	agent, err := StartAgent(ctx, vm)
	if err != nil {
		t.Fatalf("%v\nconsole:\n%s", err, vm.Console())
	}
	guest, err := interopGuest(ctx, agent)
	if err != nil {
		t.Fatal(err)
	}

	var node *realnet.Node
	if err := ns.Do(func() (err error) {
		node, err = realnet.NewNode(realnet.NodeConfig{Name: "model", Addr: netip.MustParseAddr("10.0.0.2"),
			PathMTUMax: nic.MTU1024, RecoverIPv4ID: true})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer node.Close()
	model := &udpEnd{ctx: ctx, pat: AgentPattern(2, interopMRLen)}
	if model.rc, err = node.NewRC(interopMRLen, func(b []byte) { copy(b, model.pat) }, interopPSN[1]); err != nil {
		t.Fatal(err)
	}
	if err := model.rc.Connect(realnet.Endpoint{Addr: netip.MustParseAddr("10.0.0.1"), QPN: guest.qpn, PSN: interopPSN[0],
		VA: guest.addr, RKey: guest.rkey}); err != nil {
		t.Fatal(err)
	}
	gid := readyGID.FindStringSubmatch(vm.Console())
	if gid == nil {
		t.Fatal("no GID index on the guest's console")
	}
	if _, err := agent.Do(ctx, fmt.Sprintf("connect gid=%s qpn=%d psn=%d dgid=10.0.0.2 timeout=14 retry=7 rnr_retry=7 min_rnr=12 mtu=%d",
		gid[1], model.rc.Local().QPN, interopPSN[1], interopPMTU)); err != nil {
		t.Fatal(err)
	}

	t0 := time.Now()
	cases := matrixCases()
	res, fails := runMatrix(guest, model, cases)
	fails = append(fails, compareRoles(cases, res)...)
	inv := runSendInv(ctx, agent, guest, model, uint64(2*len(cases)+1))
	t.Logf("%d cases x 2 directions and %d SEND_WITH_INV in %v", len(cases), inv.n, time.Since(t0).Round(time.Millisecond))
	for _, f := range append(fails, inv.fails...) {
		t.Error(f)
	}
	if t.Failed() {
		t.Logf("switch %+v, node %+v; capture and console kept in %s", sw.Stats(), node.Stats(), logs)
	}
	rx, err := node.RxErrors()
	st := sw.Stats()
	t.Logf("switch %+v, checksums completed on %s: %d; model receive errors %d (%v), its transport %+v",
		st, ns.Outer, p.Stats().Checksummed, rx, err, node.Transport().Stats())
	if rx != 0 {
		t.Errorf("the model counted %d receive errors", rx)
	}
}

// udpEnd is the model on realnet's UDP transport, one RC QP of a
// realnet.Node, as one end of the interop matrix.
type udpEnd struct {
	ctx context.Context
	rc  *realnet.RC
	pat []byte
}

func (e *udpEnd) name() string    { return "model" }
func (e *udpEnd) pattern() []byte { return e.pat }
func (e *udpEnd) mr() (uint64, uint32) {
	l := e.rc.Local()
	return l.VA, l.RKey
}

func (e *udpEnd) postRecv(wrid uint64, off, n int) error { return e.rc.PostRecv(wrid, off, n) }

func (e *udpEnd) postSend(op string, wrid uint64, off, n int, raddr uint64, rkey uint32, imm uint32, compare, swapAdd uint64) error {
	wr := nic.SendWR{WRID: wrid, Opcode: modelOps[op], ImmData: imm, RemoteAddr: raddr, RKey: rkey,
		CompareAdd: compare, Swap: swapAdd}
	switch op {
	case "faa":
		wr.CompareAdd = swapAdd
	case "send_inv":
		// runSendInv passes the R_Key to invalidate as rkey.
		wr.Opcode, wr.InvalidateRKey, wr.RKey = nic.WRSendWithInv, rkey, 0
	}
	return e.rc.Post(wr, off, n)
}

func (e *udpEnd) poll(n int, timeout time.Duration) ([]wcRec, error) {
	ctx, cancel := context.WithTimeout(e.ctx, timeout)
	defer cancel()
	var got []wcRec
	for len(got) < n {
		wc, err := e.rc.Wait(ctx)
		if err != nil {
			return got, fmt.Errorf("timeout: %d of %d completions: %w", len(got), n, err)
		}
		r := wcRec{WRID: wc.WRID, Status: wc.Status.Name(), Opcode: wc.Opcode.String(), ByteLen: wc.ByteLen,
			Flags: uint32(wc.WCFlags)}
		switch {
		case wc.WCFlags&nic.WCFlagWithImm != 0:
			r.Imm = wc.ImmData
		case wc.Invalidated():
			r.Inv = wc.ImmData
		}
		got = append(got, r)
	}
	return got, nil
}

func (e *udpEnd) crc(off, n int) (uint32, error) {
	b, err := e.rc.Bytes(off, n)
	return crc32.ChecksumIEEE(b), err
}

// sendInvSizes are the SEND_WITH_INV sizes: SEND_ONLY_WITH_INVALIDATE,
// and SEND_FIRST ... SEND_LAST_WITH_INVALIDATE of 4 and 64 packets.
var sendInvSizes = []int{1, 3*interopPMTU + 1, 64 << 10}

// rxeRecvInvFlags are the wc_flags of a receive that invalidated an
// R_Key, on rxe and on the model's rxe profile: IBV_WC_GRH, which rxe sets
// on every receive, and rxeWCWithInvalidate.
const rxeRecvInvFlags = uint32(nic.WCFlagGRH) | rxeWCWithInvalidate

// sendInvResult is what runSendInv did: how many cases, which failed.
type sendInvResult struct {
	n     int
	fails []string
}

// runSendInv runs SEND_WITH_INV of each of sendInvSizes in both
// directions, numbering work requests from wrid. Before each, the
// responder binds a type 2 memory window (a type 2 window is bound once
// until invalidated, o10-37.2.30; rxe_check_bind_mw) and the requester's
// SEND names its R_Key in the IETH; the receive must complete with that
// R_Key and exactly the wc_flags rxe gives, on both ends: IBV_WC_GRH and
// the kernel's IB_WC_WITH_INVALIDATE bit, IBV_WC_IP_CSUM_OK to
// libibverbs (rxe_resp.c do_complete; the model's rxe profile copies
// it), the bytes must land, and the next bind succeeding shows the
// window was freed.
// The ranges come after the matrix's (256 KiB from the MR's end).
func runSendInv(ctx context.Context, agent *Agent, guest *agentEnd, model *udpEnd, wrid uint64) sendInvResult {
	var r sendInvResult
	if _, err := agent.Script(ctx, "mr name=w len=4096 fill=zero access=lw,rw,rr,ra,mb", "mw name=W type=2"); err != nil {
		r.fails = append(r.fails, fmt.Sprintf("send_inv: guest window: %v", err))
		return r
	}
	// bind binds the responder's window; it returns the R_Key.
	bind := map[string]func(wrid uint64) (uint32, error){
		"rxe": func(wrid uint64) (uint32, error) {
			evs, err := agent.Do(ctx, fmt.Sprintf("bind mw=W wr_id=%d mr=w off=0 len=4096 access=rw", wrid))
			if err != nil {
				return 0, err
			}
			ev := lastEvent(evs, "bind")
			if ev == nil {
				return 0, errors.New("agent printed no bind event")
			}
			return ev.RKey, nil
		},
		"model": func(wrid uint64) (uint32, error) { return model.rc.BindMW(wrid, 0, 4096) },
	}
	for _, ends := range [][2]interopEnd{{guest, model}, {model, guest}} {
		req, resp := ends[0], ends[1]
		// Each direction reads and writes MR ranges the other did not.
		src, dst := interopMRLen-256<<10, interopMRLen-128<<10
		for _, n := range sendInvSizes {
			r.n++
			wrid++
			name := fmt.Sprintf("%s->%s send_inv %dB", req.name(), resp.name(), n)
			fail := func(f string, a ...any) { r.fails = append(r.fails, name+": "+fmt.Sprintf(f, a...)) }
			rkey, err := bind[resp.name()](wrid + 2*recvWRID)
			if err == nil {
				var wcs []wcRec
				wcs, err = resp.poll(1, 20*time.Second)
				if err == nil && (wcs[0].Status != "IBV_WC_SUCCESS" || wcs[0].Opcode != "IBV_WC_BIND_MW") {
					err = fmt.Errorf("bind completion %v", wcs[0])
				}
			}
			if err != nil {
				fail("%s: bind: %v", resp.name(), err)
				return r
			}
			if err := resp.postRecv(wrid+recvWRID, dst, n); err != nil {
				fail("%s: post_recv: %v", resp.name(), err)
				return r
			}
			if err := req.postSend("send_inv", wrid, src, n, 0, rkey, 0, 0, 0); err != nil {
				fail("%s: post_send: %v", req.name(), err)
				return r
			}
			rw, err := req.poll(1, 20*time.Second)
			if err != nil {
				fail("%s (requester): %v", req.name(), err)
				return r
			}
			sw, err := resp.poll(1, 20*time.Second)
			if err != nil {
				fail("%s (responder): %v", resp.name(), err)
				return r
			}
			if w := rw[0]; w.WRID != wrid || w.Status != "IBV_WC_SUCCESS" || w.Opcode != "IBV_WC_SEND" {
				fail("requester completion %v, want wr_id=%d IBV_WC_SUCCESS IBV_WC_SEND", w, wrid)
			}
			if w := sw[0]; w.WRID != wrid+recvWRID || w.Status != "IBV_WC_SUCCESS" || w.Opcode != "IBV_WC_RECV" ||
				w.ByteLen != uint32(n) || w.Inv != rkey || w.Imm != 0 || w.Flags != rxeRecvInvFlags {
				fail("responder completion %v, want wr_id=%d IBV_WC_SUCCESS IBV_WC_RECV byte_len=%d inv=%#x wc_flags=%#x",
					w, wrid+recvWRID, n, rkey, rxeRecvInvFlags)
			}
			if err := checkCRC(resp, dst, req.pattern()[src:src+n]); err != nil {
				fail("%v", err)
			}
			src += n
			dst += n
		}
	}
	return r
}

// needNetns skips the test without the harness, or without root (fails
// under CI=true), and returns its log directory: udpRig needs a network
// namespace, a veth pair and AF_PACKET.
func needNetns(t *testing.T) string {
	t.Helper()
	needHarness(t)
	if os.Geteuid() != 0 && os.Getenv("CI") == "true" {
		t.Fatalf("%s needs root (a network namespace, a veth pair, AF_PACKET) to give the guest an IP path to the host; run the conformance tests as root", t.Name())
	}
	netnstest.Skip(t)
	return logDir(t)
}

// udpRig is TestInteropUDP's segment: a namespace tagged tag with
// 10.0.0.2/24 on a veth, and rocesim switch joining the veth's outer end
// to a datagram link for a guest at 10.0.0.1, whose QEMU port is ports[0]
// and whose peer is a.LocalAddr(). The switch is closed at the test's end.
func udpRig(t *testing.T, tag, capture string) (netnstest.NS, []int, *realnet.Dgram, *realnet.Packet, *rswitch.Switch) {
	t.Helper()
	ns := netnstest.New(t, tag, "10.0.0.2/24")
	ports, err := FreeUDPPorts(1)
	if err != nil {
		t.Fatal(err)
	}
	a, err := realnet.NewDgram(realnet.DgramConfig{Local: netip.AddrPortFrom(loopback, 0),
		Peer: netip.AddrPortFrom(loopback, uint16(ports[0]))})
	if err != nil {
		t.Fatal(err)
	}
	p, err := realnet.NewPacket(realnet.PacketConfig{Interface: ns.Outer, CompleteChecksums: true})
	if err != nil {
		a.Close()
		t.Fatal(err)
	}
	sw, err := rswitch.New(rswitch.Config{A: a, B: p, NameA: "rxe", NameB: "model", CapturePath: capture})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sw.Close() })
	return ns, ports, a, p, sw
}

// TestInteropUDPPingpong: an unmodified ibv_rc_pingpong on the host, on
// the drop-in library with ROCESIM_TRANSPORT=udp at 10.0.0.2 (in
// udpRig's namespace), against ibv_rc_pingpong on real rxe in a guest at
// 10.0.0.1: GID 1 on the host, the guest's ::ffff:10.0.0.1 GID, path MTU
// 1024, 100 iterations of 1 byte, then of 4096 bytes; both pass each
// time. Root only, as TestInteropUDP.
func TestInteropUDPPingpong(t *testing.T) {
	logs := needNetns(t)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	lib := t.TempDir()
	root, _ := filepath.Abs("..")
	build := dropinbuild.Command(ctx, root, filepath.Join(lib, "libibverbs.so.1"))
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the drop-in library: %v\n%s", err, out)
	}

	ns, ports, a, _, sw := udpRig(t, "q", filepath.Join(logs, "interop-udp-pingpong.pcapng"))
	sizes := []int{1, 4096}
	vm, err := Boot(ctx, VMConfig{Name: "rxe", IP: "10.0.0.1", Peer: "10.0.0.2", LocalPort: ports[0],
		RemotePort: int(a.LocalAddr().Port()), Cmd: "ibv_rc_pingpong -d rxe0 -g $RXE_GID -n 100 -s 1 -m 1024 && ibv_rc_pingpong -d rxe0 -g $RXE_GID -n 100 -s 4096 -m 1024",
		Timeout: 5 * time.Minute, LogPath: filepath.Join(logs, "rxe-pingpong.log")})
	if err != nil {
		t.Fatal(err)
	}
	defer vm.Stop()
	for _, size := range sizes {
		// The client fails at once while the guest's server is not yet
		// listening: try again until it connects or the bound ends.
		// Each try is bounded by ctx and killed by its PID.
		var out []byte
		for ctx.Err() == nil {
			cli := exec.CommandContext(ctx, "ip", "netns", "exec", ns.Name, "ibv_rc_pingpong", "-g", "1", "-n", "100", "-s", strconv.Itoa(size), "-m", "1024", "10.0.0.1")
			cli.Env = append(os.Environ(), "LD_LIBRARY_PATH="+lib, "ROCESIM_TRANSPORT=udp", "ROCESIM_ADDR=10.0.0.2", "ROCESIM_ROUTABLE=1")
			out, err = cli.CombinedOutput()
			if err == nil || !strings.Contains(string(out), "Couldn't connect") {
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		if err != nil || !strings.Contains(string(out), fmt.Sprintf("%d bytes in", 200*size)) || !strings.Contains(string(out), "100 iters in") {
			t.Fatalf("host client, size %d: %v\n%s\nswitch %+v", size, err, out, sw.Stats())
		}
		t.Logf("host client, size %d:\n%s", size, out)
	}
	r, err := vm.Wait()
	if err != nil || r.ExitCode != 0 || strings.Count(r.Output, "100 iters in") != len(sizes) {
		t.Errorf("guest server: exit %d, %v; console:\n%s", r.ExitCode, err, r.Output)
	}
	t.Logf("switch %+v", sw.Stats())
}

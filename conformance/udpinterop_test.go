//go:build linux

package conformance

import (
	"context"
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
// kernel doing ARP, IP and UDP on the model's side. SEND, WRITE and READ
// in both directions, 1 B to 64 KiB, data checked on the other side by
// CRC-32. The model receives rxe's IPv4 IDs through a socket that does not
// report them, so it recovers them from the ICRC (RecoverIPv4ID).
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
	modelPat := AgentPattern(2, interopMRLen)
	rc, err := node.NewRC(interopMRLen, func(b []byte) { copy(b, modelPat) }, interopPSN[1])
	if err != nil {
		t.Fatal(err)
	}
	if err := rc.Connect(realnet.Endpoint{Addr: netip.MustParseAddr("10.0.0.1"), QPN: guest.qpn, PSN: interopPSN[0],
		VA: guest.addr, RKey: guest.rkey}); err != nil {
		t.Fatal(err)
	}
	gid := readyGID.FindStringSubmatch(vm.Console())
	if gid == nil {
		t.Fatal("no GID index on the guest's console")
	}
	local := rc.Local()
	if _, err := agent.Do(ctx, fmt.Sprintf("connect gid=%s qpn=%d psn=%d dgid=10.0.0.2 timeout=14 retry=7 rnr_retry=7 min_rnr=12 mtu=%d",
		gid[1], local.QPN, interopPSN[1], interopPMTU)); err != nil {
		t.Fatal(err)
	}

	// Case k reads its source at offset k (so no two cases move the same
	// bytes) and writes its destination at dstOff.
	const dstOff = 256 << 10
	k := 0
	for _, dir := range []string{"model->rxe", "rxe->model"} {
		for _, op := range []string{"send", "write", "read"} {
			for _, n := range []int{1, interopPMTU, 3*interopPMTU + 1, 64 << 10} {
				k++
				name := fmt.Sprintf("%s %s %d", dir, op, n)
				wrid := uint64(k)
				// The bytes that must arrive, and where they land.
				var want []byte
				var got func() (uint32, error)
				var err error
				if dir == "model->rxe" {
					switch op {
					case "send":
						if err = guest.postRecv(wrid+recvWRID, dstOff, n); err == nil {
							err = rc.Post(nic.SendWR{WRID: wrid, Opcode: nic.WRSend}, k, n)
						}
					case "write":
						err = rc.Post(nic.SendWR{WRID: wrid, Opcode: nic.WRRDMAWrite, RemoteAddr: guest.addr + dstOff, RKey: guest.rkey}, k, n)
					case "read":
						err = rc.Post(nic.SendWR{WRID: wrid, Opcode: nic.WRRDMARead, RemoteAddr: guest.addr + uint64(k), RKey: guest.rkey}, dstOff, n)
					}
					if op == "read" {
						want = guest.pat[k : k+n]
						got = func() (uint32, error) { b, err := rc.Bytes(dstOff, n); return crc32.ChecksumIEEE(b), err }
					} else {
						want = modelPat[k : k+n]
						got = func() (uint32, error) { return guest.crc(dstOff, n) }
					}
				} else {
					switch op {
					case "send":
						if err = rc.PostRecv(wrid+recvWRID, dstOff, n); err == nil {
							err = guest.postSend("send", wrid, k, n, 0, 0, 0, 0, 0)
						}
					case "write":
						err = guest.postSend("write", wrid, k, n, local.VA+dstOff, local.RKey, 0, 0, 0)
					case "read":
						err = guest.postSend("read", wrid, dstOff, n, local.VA+uint64(k), local.RKey, 0, 0, 0)
					}
					if op == "read" {
						want = modelPat[k : k+n]
						got = func() (uint32, error) { return guest.crc(dstOff, n) }
					} else {
						want = guest.pat[k : k+n]
						got = func() (uint32, error) { b, err := rc.Bytes(dstOff, n); return crc32.ChecksumIEEE(b), err }
					}
				}
				if err != nil {
					t.Fatalf("%s: post: %v", name, err)
				}
				// The model's completions: its requester's, or its
				// receive for a SEND it is sent.
				if dir == "model->rxe" || op == "send" {
					wctx, wcancel := context.WithTimeout(ctx, 20*time.Second)
					wc, err := rc.Wait(wctx)
					wcancel()
					if err != nil || wc.Status != nic.WCSuccess {
						t.Fatalf("%s: model completion %+v, %v; switch %+v, node %+v", name, wc, err, sw.Stats(), node.Stats())
					}
				}
				// The guest's: its requester's, or its receive.
				if dir == "rxe->model" || op == "send" {
					wcs, err := guest.poll(1, 20*time.Second)
					if err != nil || len(wcs) != 1 || wcs[0].Status != "IBV_WC_SUCCESS" {
						t.Fatalf("%s: rxe completions %v, %v; switch %+v", name, wcs, err, sw.Stats())
					}
				}
				c, err := got()
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				if c != crc32.ChecksumIEEE(want) {
					t.Errorf("%s: destination crc %#x, want %#x", name, c, crc32.ChecksumIEEE(want))
				}
			}
		}
	}
	rx, err := node.RxErrors()
	st := sw.Stats()
	t.Logf("%d cases; switch %+v, checksums completed on %s: %d; model receive errors %d (%v), its transport %+v",
		k, st, ns.Outer, p.Stats().Checksummed, rx, err, node.Transport().Stats())
	if rx != 0 {
		t.Errorf("the model counted %d receive errors", rx)
	}
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
	wd, _ := os.Getwd()
	build := exec.CommandContext(ctx, "go", "build", "-buildmode=c-shared",
		"-ldflags=-extldflags=-Wl,-soname,libibverbs.so.1,--version-script,"+filepath.Join(wd, "..", "dropin", "ibverbs", "libibverbs.map"),
		"-o", filepath.Join(lib, "libibverbs.so.1"), "../dropin/ibverbs")
	build.Env = append(os.Environ(), "CGO_ENABLED=1")
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

package rdmacm_test

import (
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/rocesim/rocesim/internal/tsharktest"
	"github.com/rocesim/rocesim/sim"
	"github.com/rocesim/rocesim/wire"
	"github.com/rocesim/rocesim/wire/capture"
)

// dissectFields are the tshark fields of a CM frame that real rxe and
// the model must show alike. Left out, because they are drawn at random
// or name the machine: IP IDs and checksums, the ICRC, communication
// and transaction IDs, CA GUIDs (the EUI-64 of QEMU's and the model's
// MACs), starting PSNs, the client's rdma_cm port and the flow label
// hashed from it (and the packet rate tshark reads out of the same word;
// see wire/cm_test.go).
var dissectFields = []string{
	"eth.type", "ip.src", "ip.dst", "ip.dsfield", "ip.flags", "ip.ttl", "ip.len", "udp.srcport", "udp.dstport", "udp.length", "udp.checksum",
	"infiniband.bth.opcode", "infiniband.bth.se", "infiniband.bth.m", "infiniband.bth.padcnt", "infiniband.bth.tver",
	"infiniband.bth.p_key", "infiniband.bth.destqp", "infiniband.bth.a", "infiniband.bth.psn",
	"infiniband.deth.q_key", "infiniband.deth.srcqp",
	"infiniband.mad.baseversion", "infiniband.mad.mgmtclass", "infiniband.mad.classversion", "infiniband.mad.method",
	"infiniband.mad.status", "infiniband.mad.classspecific", "infiniband.mad.attributeid", "infiniband.mad.attributemodifier",
	"infiniband.cm.req.serviceid", "infiniband.cm.req.localqkey", "infiniband.cm.req.localqpn",
	"infiniband.cm.req.responderres", "infiniband.cm.req.localeecn", "infiniband.cm.req.initdepth", "infiniband.cm.req.remoteeecn",
	"infiniband.cm.req.remoteresptout", "infiniband.cm.req.transpsvctype", "infiniband.cm.req.e2eflowctrl",
	"infiniband.cm.req.localresptout", "infiniband.cm.req.retrcount", "infiniband.cm.req.pkey", "infiniband.cm.req.pppmtu",
	"infiniband.cm.req.rdcexist", "infiniband.cm.req.rnrretrcount", "infiniband.cm.req.maxcmretr", "infiniband.cm.req.srq",
	"infiniband.cm.req.ext_transport", "infiniband.cm.req.prim_locallid", "infiniband.cm.req.prim_remotelid",
	"infiniband.cm.req.prim_localgid_ipv4", "infiniband.cm.req.prim_remotegid_ipv4",
	"infiniband.cm.req.prim_tfcclass", "infiniband.cm.req.prim_hoplim", "infiniband.cm.req.prim_sl",
	"infiniband.cm.req.prim_subnetlocal", "infiniband.cm.req.prim_localacktout", "infiniband.cm.req.alt_locallid",
	"infiniband.cm.req.alt_remotelid", "infiniband.cm.req.alt_localgid", "infiniband.cm.req.alt_remotegid",
	"infiniband.cm.req.alt_flowlabel", "infiniband.cm.req.alt_pktrate", "infiniband.cm.req.alt_hoplim",
	"infiniband.cm.req.alt_localacktout", "infiniband.cm.req.ip_cm.majv", "infiniband.cm.req.ip_cm.minv",
	"infiniband.cm.req.ip_cm.ipv", "infiniband.cm.req.ip_cm.sip4", "infiniband.cm.req.ip_cm.dip4", "infiniband.cm.req.ip_cm.private",
	"infiniband.cm.rep.localqkey", "infiniband.cm.rep.localqpn", "infiniband.cm.rep.localeecn", "infiniband.cm.rep.respres",
	"infiniband.cm.rep.initdepth", "infiniband.cm.rep.tgtackdelay", "infiniband.cm.rep.failoveracc",
	"infiniband.cm.rep.e2eflowctrl", "infiniband.cm.rep.rnrretrcount", "infiniband.cm.rep.srq", "infiniband.cm.rep.private",
	"infiniband.cm.rtu.private", "infiniband.cm.req.remoteqpneecn", "infiniband.cm.dreq.private", "infiniband.cm.drsp.private",
}

// cmDissection returns tshark's dissectFields for each CM frame of a
// capture, keyed by message kind in order of appearance ("REQ#1", ...).
func cmDissection(t *testing.T, path string) (map[string][]string, []string) {
	args := []string{"-r", path, "-Y", "infiniband.bth.destqp == 1", "-T", "fields", "-E", "separator=\t"}
	for _, f := range dissectFields {
		args = append(args, "-e", f)
	}
	out := map[string][]string{}
	var order []string
	seen := map[string]int{}
	for _, line := range strings.Split(strings.TrimRight(tsharktest.Run(t, args...), "\n"), "\n") {
		cols := strings.Split(line, "\t")
		// tshark prints a field asked for twice only once, so the
		// message kind is read from its place in dissectFields.
		attr, err := strconv.ParseUint(cols[slices.Index(dissectFields, "infiniband.mad.attributeid")], 0, 16)
		if err != nil {
			t.Fatalf("attribute ID %q: %v (line %q)", cols[0], err, line)
		}
		kind := wire.CMAttr(attr).String()
		seen[kind]++
		key := kind + "#" + strconv.Itoa(seen[kind])
		out[key] = cols
		order = append(order, key)
	}
	return out, order
}

// TestCMDissectsAsRxe: the model's CM frames for an rping-like connect
// and disconnect (client 10.0.0.2, server 10.0.0.1 on port 7174, the
// addresses of the capture) dissect in tshark as real rxe's did in
// wire/testdata/cm/rxe_cm_rping.pcapng, field by field, but for the
// fields drawn at random (dissectFields).
func TestCMDissectsAsRxe(t *testing.T) {
	tsharktest.Need(t)
	p := newPair(t, "")
	cli, srv := p.establish(t)
	p.hangUp(t, cli, srv)
	path := p.rec.writePcapng(t)
	model, order := cmDissection(t, path)
	real, realOrder := cmDissection(t, filepath.Join("..", "wire", "testdata", "cm", "rxe_cm_rping.pcapng"))
	if strings.Join(order, " ") != strings.Join(realOrder, " ") {
		t.Fatalf("CM messages: model %v, rxe %v", order, realOrder)
	}
	compared := 0
	for _, key := range order {
		for i, f := range dissectFields {
			if model[key][i] != real[key][i] {
				t.Errorf("%s %s: model %q, rxe %q", key, f, model[key][i], real[key][i])
			}
			compared++
		}
	}
	t.Logf("%d messages, %d field values compared", len(order), compared)
}

// writePcapng writes the recorded frames to a pcapng file in the test's
// temporary directory and returns its path.
func (r *recorder) writePcapng(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "model_cm.pcapng")
	cw, err := capture.Create(path, capture.PcapngOptions{})
	if err != nil {
		t.Fatal(err)
	}
	iface, err := cw.AddInterface("model", "rdmacm test")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range r.frames {
		if err := cw.WriteFrame(int64(f.at)+1, iface, f.data, f.comment); err != nil {
			t.Fatal(err)
		}
	}
	if err := cw.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestMRADissects: the model's MRA (TestLateAcceptMRA's) dissects in
// tshark as real rxe's did in wire/testdata/cm/rxe_cm_mra.pcapng,
// field by field (dissectFields). tshark 4.0 names the MRA "CM
// MsgRcptAck" but does not dissect its body, so the body's bytes are
// compared from byte 8 on (before them: the random communication IDs):
// message MRAed 0 in the top two bits of byte 8, service timeout 24 in
// the top five of byte 9, zeros after (IBTA vol. 1 §12.6.6).
func TestMRADissects(t *testing.T) {
	tsharktest.Need(t)
	p := newPair(t, "")
	lateAccept(t, p, 8*sim.Second)
	path := p.rec.writePcapng(t)
	realPath := filepath.Join("..", "wire", "testdata", "cm", "rxe_cm_mra.pcapng")
	model, _ := cmDissection(t, path)
	real, _ := cmDissection(t, realPath)
	mra, want := model["MRA#1"], real["MRA#1"]
	if mra == nil || want == nil {
		t.Fatalf("MRA dissected: model %v, rxe %v", mra != nil, want != nil)
	}
	for i, f := range dissectFields {
		// QP1's BTH PSN counts the MADs the host has sent since it
		// booted: the rxe guest had sent two before (the harness's
		// warm-up connection); the model's host none.
		if mra[i] != want[i] && f != "infiniband.bth.psn" {
			t.Errorf("MRA %s: model %q, rxe %q", f, mra[i], want[i])
		}
	}
	body := func(path string) string {
		data := strings.TrimSpace(tsharktest.Run(t, "-r", path, "-Y", "infiniband.mad.attributeid == 0x0011", "-T", "fields", "-e", "infiniband.mad.data"))
		if len(data) != 2*wire.MADDataLen {
			t.Fatalf("MRA body in %s: %d hex digits, want %d", path, len(data), 2*wire.MADDataLen)
		}
		return data[16:]
	}
	if m, r := body(path), body(realPath); m != r || !strings.HasPrefix(r, "00c0") {
		t.Errorf("MRA body from byte 8: model %.24s…, rxe %.24s…, want both 00c0 then zeros", m, r)
	}
	if out := tsharktest.Run(t, "-r", path, "-Y", "infiniband.mad.attributeid == 0x0011", "-V"); !strings.Contains(out, "CM MsgRcptAck") {
		t.Errorf("tshark does not name the model's MRA:\n%s", out)
	}
}

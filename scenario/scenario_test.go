package scenario_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocesim/rocesim/scenario"
	"github.com/rocesim/rocesim/sim"
	"github.com/rocesim/rocesim/verbs"
)

// catalogue is the issue's list, in Builtin's order.
var catalogue = []string{"go-back-n", "ack-timeout", "retry-exceeded", "rnr", "rnr-exceeded", "cq-overflow",
	"remote-access-error", "read-atomic", "duplicate", "ack-loss", "psn-wrap", "unsignaled", "uc-loss", "alltoall",
	"multicast", "pingpong", "bandwidth", "rnr-repost",
	"cm-lost-req", "cm-lost-rep", "cm-lost-rtu", "cm-reject", "cm-no-listener", "cm-disconnect-flush"}

// TestBuiltinsMeetTheirExpectations runs every built-in under both
// profiles and a few seeds: each parses, runs and meets every claim.
func TestBuiltinsMeetTheirExpectations(t *testing.T) {
	var names []string
	for _, s := range scenario.Builtin() {
		names = append(names, s.Name)
		assert.NotEmpty(t, s.Description, s.Name)
		assert.Greater(t, s.Expectations(), 0, s.Name)
		assert.Equal(t, s.Name+".scenario", s.File, "a built-in is named after its file")
		for _, prof := range []verbs.Profile{verbs.ProfileRXE, verbs.ProfileSpec} {
			for _, seed := range []uint64{0, 2, 99} {
				res, err := s.Run(scenario.Options{Seed: seed, Profile: prof})
				require.NoError(t, err, "%s %v seed %d", s.Name, prof, seed)
				assert.Empty(t, res.Failed, "%s %v seed %d", s.Name, prof, seed)
				assert.True(t, res.Passed())
				assert.Equal(t, prof.String(), res.Profile)
				assert.NotEmpty(t, res.Completions, s.Name)
				assert.Positive(t, res.Frames, s.Name)
			}
		}
	}
	assert.Equal(t, catalogue, names)
}

// TestLookup finds built-ins by name, with or without the extension.
func TestLookup(t *testing.T) {
	s, ok := scenario.Lookup("go-back-n")
	require.True(t, ok)
	assert.Equal(t, "go-back-n", s.Name)
	s2, ok := scenario.Lookup("go-back-n.scenario")
	require.True(t, ok)
	assert.Same(t, s, s2)
	_, ok = scenario.Lookup("no-such")
	assert.False(t, ok)
	assert.Equal(t, uint64(1), s.Seed())
	assert.Equal(t, []string{"a", "b"}, s.Nodes())
	assert.Equal(t, "drop psn=2 tx=1 src=a\n", s.Faults())
}

// TestExamplesAreTheBuiltins: examples/ holds exactly the embedded files,
// byte for byte, and running a file from there gives the built-in's
// Result and trace.
func TestExamplesAreTheBuiltins(t *testing.T) {
	dir := filepath.Join("..", "examples")
	paths, err := filepath.Glob(filepath.Join(dir, "*.scenario"))
	require.NoError(t, err)
	embedded := scenario.BuiltinFiles()
	var onDisk, inBinary []string
	for _, p := range paths {
		onDisk = append(onDisk, filepath.Base(p))
	}
	for n := range embedded {
		inBinary = append(inBinary, n)
	}
	sort.Strings(inBinary)
	require.Equal(t, inBinary, onDisk, "examples/ and scenario/builtin/ hold the same files")
	for _, p := range paths {
		text, err := os.ReadFile(p)
		require.NoError(t, err)
		base := filepath.Base(p)
		require.Equal(t, embedded[base], string(text), "%s differs from the embedded copy", p)
		fromFile, err := scenario.Parse(p, string(text))
		require.NoError(t, err)
		builtin, ok := scenario.Lookup(base)
		require.True(t, ok)
		a, err := fromFile.Run(scenario.Options{})
		require.NoError(t, err)
		b, err := builtin.Run(scenario.Options{})
		require.NoError(t, err)
		assert.Equal(t, b.Trace.Text(), a.Trace.Text(), p)
		a.Trace, b.Trace = nil, nil
		assert.Equal(t, b, a, p)
	}
}

// TestSameSeedSameRun: two runs with one seed give identical traces and
// Results, for every built-in.
func TestSameSeedSameRun(t *testing.T) {
	for _, s := range scenario.Builtin() {
		a, err := s.Run(scenario.Options{Seed: 7})
		require.NoError(t, err)
		b, err := s.Run(scenario.Options{Seed: 7})
		require.NoError(t, err)
		require.NotEmpty(t, a.Trace.Events())
		assert.Equal(t, a.Trace.Text(), b.Trace.Text(), s.Name)
		ja, err := json.Marshal(a)
		require.NoError(t, err)
		jb, err := json.Marshal(b)
		require.NoError(t, err)
		assert.Equal(t, string(ja), string(jb), s.Name)
		a.Trace, b.Trace = nil, nil
		assert.Equal(t, a, b, s.Name)
	}
}

// TestOptionsTraceIsUsed: a trace passed in is the one filled and
// returned.
func TestOptionsTraceIsUsed(t *testing.T) {
	s, _ := scenario.Lookup("go-back-n")
	tr := &sim.Trace{}
	res, err := s.Run(scenario.Options{Trace: tr})
	require.NoError(t, err)
	assert.Same(t, tr, res.Trace)
	var steps []string
	for _, e := range tr.Events() {
		if e.Kind == "step" {
			line, _ := e.Get("line")
			step, _ := e.Get("step")
			steps = append(steps, e.Node+" "+line+" "+step)
		}
	}
	assert.Equal(t, []string{"b 16 b.q recv wr=1 len=4096", "a 17 a.q send wr=2 op=send len=4096"}, steps)
}

// TestGoBackNResult pins the whole Result of the first scenario.
func TestGoBackNResult(t *testing.T) {
	s, _ := scenario.Lookup("go-back-n")
	res, err := s.Run(scenario.Options{})
	require.NoError(t, err)
	res.Trace = nil
	// The memory apart (4 KiB each): b.buf received a.buf.
	require.Len(t, res.Memory, 2)
	assert.Equal(t, "a.buf", res.Memory[0].Name)
	assert.Equal(t, "b.buf", res.Memory[1].Name)
	assert.Equal(t, res.Memory[0].Bytes, res.Memory[1].Bytes)
	assert.Equal(t, byte(255), res.Memory[1].Bytes[4095])
	res.Memory = nil
	assert.Equal(t, &scenario.Result{
		Scenario: "go-back-n", Seed: 1, Profile: "rxe",
		Completions: []scenario.Completion{
			// rxe reports a send-side completion's message length.
			{Node: "a", QPN: 0x11, WRID: 2, Status: "IBV_WC_SUCCESS", Opcode: "IBV_WC_SEND", ByteLen: 4096, WCFlags: "0"},
			// rxe flags every receive IBV_WC_GRH, RC too.
			{Node: "b", QPN: 0x11, WRID: 1, Status: "IBV_WC_SUCCESS", Opcode: "IBV_WC_RECV", ByteLen: 4096, WCFlags: "IBV_WC_GRH"},
		},
		AsyncEvents: []scenario.AsyncEvent{},
		Counters: map[string]map[string]uint64{
			"a": {"completer_retry_err": 1, "rcvd_pkts": 2, "rcvd_seq_err": 1, "rdma_sends": 1, "sent_pkts": 7},
			"b": {"out_of_seq_request": 1, "rcvd_pkts": 6, "rdma_recvs": 1, "sent_pkts": 2},
		},
		Frames:      9, // 7 data frames (one dropped), a NAK and an ACK
		VirtualTime: 4459 * sim.Nanosecond,
		Checked:     11,
	}, res)
}

// TestResultJSON: the JSON field names are the CLI's schema.
func TestResultJSON(t *testing.T) {
	s, _ := scenario.Lookup("retry-exceeded")
	res, err := s.Run(scenario.Options{})
	require.NoError(t, err)
	b, err := json.Marshal(res)
	require.NoError(t, err)
	var m map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(b, &m))
	assert.ElementsMatch(t, []string{"scenario", "seed", "profile", "completions", "async_events", "counters", "frames", "virtual_time_ns"}, keys(m))
	var comps []map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(m["completions"], &comps))
	require.NotEmpty(t, comps)
	assert.ElementsMatch(t, []string{"node", "qpn", "wr_id", "status", "opcode", "byte_len", "imm", "wc_flags"}, keys(comps[0]))
	var evs []map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(m["async_events"], &evs))
	require.NotEmpty(t, evs)
	assert.ElementsMatch(t, []string{"node", "type", "qpn"}, keys(evs[0]))
	assert.Equal(t, `"retry-exceeded"`, string(m["scenario"]))
	// rxe's retransmit timer, armed by the SEND at 0 and never stopped,
	// fires the first retry of the SENDs at 20 µs one timeout after 0.
	assert.Equal(t, `16000000`, string(m["virtual_time_ns"]), "4 timeouts of one jiffy (timeout=8: 1.05 ms, rounded to 4 ms) from the first SEND")
	assert.Contains(t, string(b), `{"node":"a","qpn":17,"wr_id":2,"status":"IBV_WC_RETRY_EXC_ERR","opcode":"IBV_WC_SEND","byte_len":0,"imm":0,"wc_flags":"0"}`)
	assert.Contains(t, string(b), `"async_events":[{"node":"a","type":"IBV_EVENT_PORT_ERR","qpn":0},{"node":"b","type":"IBV_EVENT_PORT_ERR","qpn":0}]`)

	// A failing run also lists what failed.
	bad, err := scenario.Parse("bad", s.Text+"expect a.q state RTS\n")
	require.NoError(t, err)
	res, err = bad.Run(scenario.Options{})
	require.NoError(t, err)
	b, err = json.Marshal(res)
	require.NoError(t, err)
	last := strings.Count(s.Text, "\n") + 1
	assert.Contains(t, string(b), fmt.Sprintf(`"failed":["line %d: expect a.q state RTS: got ERR"]`, last))
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestFailedExpectationsSayWhatHappened: each unmet claim names its line,
// what it claimed and what happened.
func TestFailedExpectationsSayWhatHappened(t *testing.T) {
	s, _ := scenario.Lookup("go-back-n")
	n := strings.Count(s.Text, "\n")
	text := s.Text + strings.Join([]string{
		"expect a.q wr=2 IBV_WC_RETRY_EXC_ERR",
		"expect a.q wr=9 SUCCESS",
		"expect b.q wr=1 SUCCESS opcode=IBV_WC_SEND byte_len=10",
		"expect b.q wr=1 SUCCESS flags=IBV_WC_WITH_IMM",
		"expect counter a.rcvd_seq_err=5",
		"expect counter a.retry_exceeded_err>=1",
		"expect b.q completions none",
		"expect events a CQ_ERR",
		"expect event b CQ_ERR",
		"expect a.q state ERR",
		"expect mem b.buf+0 u64=7",
		"expect mem b.buf+1 len=8 equals=a.buf",
	}, "\n") + "\n"
	bad, err := scenario.Parse("bad.scenario", text)
	require.NoError(t, err)
	assert.Equal(t, "go-back-n", bad.Name, "the scenario line names it, not the file")
	res, err := bad.Run(scenario.Options{})
	require.NoError(t, err)
	assert.False(t, res.Passed())
	l := func(i int) string { return fmt.Sprintf("line %d: ", n+i) }
	assert.Equal(t, []string{
		l(1) + "expect a.q wr=2 IBV_WC_RETRY_EXC_ERR: got status IBV_WC_SUCCESS",
		l(2) + "expect a.q wr=9 SUCCESS: expected one completion of wr 9 on a.q, got 0",
		l(3) + "expect b.q wr=1 SUCCESS opcode=IBV_WC_SEND byte_len=10: got opcode IBV_WC_RECV, byte_len 4096",
		l(4) + "expect b.q wr=1 SUCCESS flags=IBV_WC_WITH_IMM: got flags IBV_WC_GRH",
		l(5) + "expect counter a.rcvd_seq_err=5: got 1",
		l(6) + "expect counter a.retry_exceeded_err>=1: got 0",
		l(7) + "expect b.q completions none: got 1:IBV_WC_SUCCESS",
		l(8) + "expect events a CQ_ERR: got none",
		l(9) + "expect event b CQ_ERR: got 0 such events; b had none",
		l(10) + "expect a.q state ERR: got RTS",
		l(11) + "expect mem b.buf+0 u64=7: got 506097522914230528 (0x706050403020100)",
		l(12) + "expect mem b.buf+1 len=8 equals=a.buf: 8 bytes differ, the first at offset 0: 0x01, not 0x00",
	}, res.Failed)
}

// TestLivelockIsAnError: rxe's retry_cnt 7 retries forever on a dead
// link; the event limit turns that into an error, a deadline into a
// clean stop, and the IBTA profile gives up after 7 retries.
func TestLivelockIsAnError(t *testing.T) {
	const text = `
node a b
link a b
mr a.buf size=64
qp a.q rc peer=b.q retry_cnt=7 timeout=1
qp b.q rc
fault down link=a-b
at 0 a.q send wr=1 len=8
`
	s, err := scenario.Parse("forever.scenario", text)
	require.NoError(t, err)
	assert.Equal(t, "forever", s.Name, "named after its file")
	res, err := s.Run(scenario.Options{MaxEvents: 1000})
	require.Error(t, err)
	assert.True(t, errors.Is(err, sim.ErrEventLimit), "%v", err)
	require.NotNil(t, res, "what happened so far")
	assert.Empty(t, res.Completions)

	res, err = s.Run(scenario.Options{Profile: verbs.ProfileSpec})
	require.NoError(t, err)
	assert.Equal(t, []scenario.Completion{{Node: "a", QPN: 0x11, WRID: 1, Status: "IBV_WC_RETRY_EXC_ERR", Opcode: "IBV_WC_SEND", WCFlags: "0"}}, res.Completions)

	d, err := scenario.Parse("deadline", text+"deadline 102ms\n")
	require.NoError(t, err)
	res, err = d.Run(scenario.Options{})
	require.NoError(t, err)
	assert.Equal(t, 102*sim.Millisecond, res.VirtualTime)
	assert.Empty(t, res.Completions)
	// timeout=1 is 8.192 µs, 0 jiffies, which rxe_qp_from_attr makes 1.
	assert.Equal(t, uint64(1+25), res.Counters["a"]["sent_pkts"], "a retry every jiffy, 4 ms")
	res, err = d.Run(scenario.Options{Profile: verbs.ProfileSpec})
	require.NoError(t, err)
	assert.Equal(t, uint64(1+7), res.Counters["a"]["sent_pkts"], "7 retries 8.192 µs apart, then RETRY_EXC_ERR")
}

// countingTap counts the frames a capture would hold.
type countingTap struct{ ifaces, frames int }

func (c *countingTap) AddInterface(name, description string) (int, error) {
	c.ifaces++
	return c.ifaces - 1, nil
}

func (c *countingTap) WriteFrame(ns int64, iface int, frame []byte, comment string) error {
	c.frames++
	return nil
}

// TestFramesMatchACapture: Result.Frames is the number of frames a
// capture of the whole fabric holds, dropped ones included.
func TestFramesMatchACapture(t *testing.T) {
	for _, c := range []struct {
		name  string
		links int
	}{{"go-back-n", 1}, {"alltoall", 4}, {"duplicate", 1}, {"retry-exceeded", 1}} {
		s, _ := scenario.Lookup(c.name)
		tap := &countingTap{}
		res, err := s.Run(scenario.Options{Capture: tap})
		require.NoError(t, err)
		assert.Equal(t, tap.frames, res.Frames, c.name)
		assert.Equal(t, 2*c.links, tap.ifaces, "%s: one interface per link direction", c.name)
	}
}

// TestEveryStepKind covers what the catalogue does not: a QP brought up
// by modify steps, WRITE with immediate, UD with an address handle, a
// manual CQ drained by a poll step, per-link options and inline data.
func TestEveryStepKind(t *testing.T) {
	const text = `scenario features
description everything else
seed 5
node a b
link a b bandwidth=25Gbps delay=2us mtu=4200 queue=64KiB
mr a.buf size=8192 fill=seq
mr b.buf size=8192 access=local_write,remote_write
cq b.cq size=8 poll=manual
qp a.q rc peer=b.q state=init mtu=4096 max_inline=64
qp b.q rc cq=cq state=rtr
qp a.u ud
qp b.u ud qkey=0x1234
at 0 b.q recv wr=1 len=8192
at 0 b.u recv wr=2 len=100 local=b.buf+6000
at 1us a.q modify state=rtr
at 1us a.q modify state=rts
at 2us a.q send wr=3 op=write_imm len=5000 imm=0xcafe
at 2us a.q send wr=4 op=send len=16 inline solicited fence unsignaled
at 2us a.u send wr=5 len=8 dest=b.u
at 2us a.u send wr=6 len=8 dest=b.u qkey=0x9999
at 1ms b.q poll
at 2ms b.q recv wr=7 len=64
at 2500us b.q modify state=rts
at 3ms poll
expect a.q state RTS
expect b.q state RTS
expect a.q completions 3:SUCCESS
expect a.u completions 5:SUCCESS 6:SUCCESS
expect b.q wr=1 SUCCESS opcode=IBV_WC_RECV_RDMA_WITH_IMM byte_len=5000 imm=0xcafe flags=GRH|with_imm
expect a.q wr=3 SUCCESS flags=IBV_WC_WITH_IMM
expect b.u wr=2 SUCCESS flags=IBV_WC_GRH
expect b.q wr=7 SUCCESS opcode=RECV byte_len=16
expect b.u completions 2:SUCCESS
expect b.u wr=2 SUCCESS byte_len=48
expect mem b.buf len=5000 equals=a.buf
expect mem b.buf+6040 len=8 equals=a.buf
expect events b COMM_EST
expect events a none
`
	s, err := scenario.Parse("features.scenario", text)
	require.NoError(t, err)
	assert.Equal(t, "everything else", s.Description)
	res, err := s.Run(scenario.Options{})
	require.NoError(t, err)
	assert.Empty(t, res.Failed)
	assert.Equal(t, uint64(5), res.Seed)
	// a.u's sends complete as they leave (UD) and are polled right after
	// their steps. The WRITE's completion (a) and the datagram's (b.u) are
	// polled before the step at 1 ms, node a first; b.cq (manual) holds
	// wr 1 until that step polls it. The SEND (wr 4, unsignaled) waits in
	// RNR until wr 7 is posted at 2 ms.
	var order []string
	for _, c := range res.Completions {
		order = append(order, fmt.Sprintf("%s:%d", c.Node, c.WRID))
	}
	assert.Equal(t, []string{"a:5", "a:6", "a:3", "b:2", "b:1", "b:7"}, order)
}

// TestParseErrors: malformed files fail with "line:col: message".
func TestParseErrors(t *testing.T) {
	const prelude = "node a b\nlink a b\nmr a.buf size=64\nmr b.buf size=64\nqp b.q rc peer=a.p\nqp a.p rc\n" // lines 1-6
	counters := "sent_pkts, rcvd_pkts, duplicate_request, out_of_seq_request, rcvd_rnr_err, send_rnr_err, rcvd_seq_err, " +
		"ack_deferred, retry_exceeded_err, retry_rnr_exceeded_err, completer_retry_err, send_err, link_downed, rdma_sends, rdma_recvs"
	wcFlags := "IBV_WC_GRH, IBV_WC_WITH_IMM, IBV_WC_IP_CSUM_OK, IBV_WC_WITH_INV, IBV_WC_TM_SYNC_REQ, IBV_WC_TM_MATCH, IBV_WC_TM_DATA_VALID"
	for _, c := range []struct{ text, want string }{
		{"at ten a.p send wr=1 len=8", `7:4: expected a duration like 10us, got "ten"`},
		{"at 0 a.p send wr=1 len=8 rkey=3 remote=b.buf", `7:26: remote= and rkey= apply to write, write_imm, read, cas and faa`},
		{"qp a.q rc peer=b.q psn=x", `7:24: bad psn "x": expected a number (decimal or 0x hex)`},
		{"link c a", `7:6: unknown node "c" (declare it first with node c)`},
		{"link a b", `7:6: node "a" is already attached (line 2): a node has one port`},
		{"fault drop pns=2", `7:12: unknown key "pns"`},
		{"fault drop psn=x", `7:16: bad psn "x": want a number (decimal or 0x hex)`},
		{"expect events a none profile=ibta", `7:30: bad profile "ibta": want rxe or spec`},
		{"fault lose psn=2", `7:7: unknown action "lose" (want drop, dup, delay, reorder, corrupt, truncate, rewrite, down or partition)`},
		{"fault down link=a-c", `7:17: no link "a-c" in this scenario (links: a-b)`},
		{"fault drop src=c", `7:16: no node "c" in this scenario`},
		{"fault drop dir=a->c", `7:16: no node "c" in this scenario`},
		{"fault partition a|c from=1ms", `7:17: no node "c" in this scenario`},
		{"expect a.p wr=1 wr=2 SUCCESS", `7:17: duplicate key "wr"`},
		{"fault", `7:1: fault needs one rule of the faults text format, e.g. fault drop psn=2 tx=1`},
		{"nod c", `7:1: unknown statement "nod" (want scenario, description, seed, deadline, node, link, switch, mr, mw, cq, qp, fault, at, on or expect)`},
		{"at 1ms a.p send len=8", `7:12: send needs wr=, e.g. send wr=1 op=send len=64`},
		{"at 1ms a.p send wr=1 op=foo len=8", `7:25: bad op "foo": want send, send_imm, write, write_imm, read, cas, faa, send_inv, local_inv or bind`},
		{"at 1ms a.p send wr=1 len=8 imm=3", `7:28: imm= applies only to op=send_imm and op=write_imm`},
		{"at 0 a.p send wr=1 wr=2 len=8", `7:20: duplicate key "wr"`},
		{"at 0 a.p send wr=1 len=8 signaled unsignaled", `7:35: send is signaled or unsignaled, not both`},
		{"at 0 a.p jump", `7:10: unknown step "jump" (want send, recv, modify, poll or rereg)`},
		{"at 2ms a.p send wr=1 len=8\nat 1ms a.p send wr=2 len=8", `8:4: step at 1ms comes after a step at 2ms: list steps in time order`},
		{"at 0 a.zz send wr=1 len=8", `7:6: unknown QP a.zz (declare it with qp a.zz rc|uc|ud)`},
		{"at 0 a.p send wr=1 len=8 local=b.buf", `7:32: local buffer b.buf is not on node a`},
		{"at 0 a.p send wr=1 op=read len=8 remote=a.buf", `7:41: remote buffer a.buf is not on b, the node of a.p's peer`},
		{"expect a.p wr=1 IBV_WC_BOGUS", `7:17: expected a completion status like IBV_WC_SUCCESS or IBV_WC_RETRY_EXC_ERR, got "IBV_WC_BOGUS"`},
		{"expect a.p wr=1 SUCCESS flags=IBV_WC_GRH|IBV_WC_BOGUS", `7:42: bad flags "IBV_WC_BOGUS": want 0 or completion flags joined by |, e.g. flags=IBV_WC_GRH|IBV_WC_WITH_IMM (verbs.h: ` + wcFlags + `)`},
		{"expect a.p wr=1 SUCCESS flags=1", `7:31: bad flags "1": want 0 or completion flags joined by |, e.g. flags=IBV_WC_GRH|IBV_WC_WITH_IMM (verbs.h: ` + wcFlags + `)`},
		{"expect a.p wr=1 SUCCESS flags=", `7:25: missing value for flags=`},
		{"expect a.p wr=1 SUCCESS foo=1", `7:25: unknown key "foo" (want wr=, opcode=, byte_len=, imm=, flags= and a status)`},
		{"expect a.p completions 1-SUCCESS", `7:24: expected wr:STATUS like 2:IBV_WC_SUCCESS, got "1-SUCCESS"`},
		{"expect counter a.bogus=1", `7:18: unknown counter "bogus" (rxe's: ` + counters + `)`},
		{"expect counter a.sent_pkts~1", `7:16: expected node.counter=N, e.g. a.rcvd_seq_err=1, got "a.sent_pkts~1"`},
		{"expect mem a.buf u64=1 len=8", `7:12: expect mem takes u64= or len= with equals=, not both`},
		{"expect event c CQ_ERR", `7:14: unknown node "c"`},
		{"expect events a WHATEVER", `7:17: expected an async event like IBV_EVENT_CQ_ERR or QP_ACCESS_ERR, got "WHATEVER"`},
		{"node c\nlink a c", `8:6: node "a" is already attached (line 2): a node has one port`},
		{"node c d\nlink c d delay=fast", `8:16: expected a duration like 10us, got "fast"`},
		{"node c d\nlink c d bandwidth=fast", `8:20: expected a bandwidth like 100Gbps or 2.5Gbps, got "fast"`},
		{"node c d\nswitch s c", `8:8: switch s needs at least two nodes`},
		{"node c", `7:1: node c is on no link or switch`},
		{"mw b.w", `7:1: mw needs type=1 or type=2, e.g. mw b.w type=2`},
		{"mw b.w type=3", `7:13: bad type "3": want 1 or 2`},
		{"mw b.buf type=2", `7:4: b.buf is already declared on line 4 (mr, mw, cq and qp names share one namespace per node)`},
		{"at 0 a.p send wr=1 op=bind len=8", `7:10: op=bind needs mw=node.window`},
		{"mw b.w type=2\nat 0 a.p send wr=1 op=bind mw=b.w len=8", `8:31: op=bind names a window of a.p's own node, not b.w`},
		{"mw a.w type=2\nat 0 a.p send wr=1 op=send_inv mw=a.w len=8", `8:35: window a.w is not on the node of a.p's peer`},
		{"mw b.w type=2\nat 0 a.p send wr=1 op=write mw=b.w len=8 access=remote_read", `8:10: access= applies only to op=bind`},
		{"at 0 a.p send wr=1 op=write mw=b.zz len=8", `7:32: unknown memory window b.zz (declare it with mw b.zz type=2)`},
		{"mw b.w type=2\nat 0 a.p send wr=1 op=write mw=b.w rkey=5 len=8", `8:10: mw= gives the window's R_Key: no rkey= with it`},
		{"qp a.u uc peer=b.q", `7:16: QP a.u is UC but its peer b.q is RC`},
		{"qp a.r rc peer=b.q", `7:16: QP b.q is already the peer of a.p`},
		{"qp a.r rc peer=b.s\nqp b.s rc peer=b.q state=init", `7:16: QP b.s names b.q as its peer, not a.r`},
		{"qp a.r rc", `7:1: RC QP a.r needs a peer (peer=node.qp), or state=reset|init until a modify step`},
		{"qp a.r xc", `7:8: bad QP type "xc": want rc, uc or ud`},
		{"qp a.buf rc", `7:4: a.buf is already declared on line 3 (mr, mw, cq and qp names share one namespace per node)`},
		{"qp a.r rc peer=b.s cq=nope state=init", `7:23: unknown CQ a.nope (declare it with cq a.nope size=N)`},
		{"mr a.x", `7:1: mr needs size=, e.g. mr a.x size=4096`},
		{"mr a.x size=4 access=remote_read,remote_wrote", `7:34: bad access "remote_wrote": want local_write, remote_write, remote_read, remote_atomic, mw_bind (comma-separated) or none`},
		{"mr a.x size=big", `7:13: expected a size like 4096 or 64KiB, got "big"`},
		{"cq a.c poll=sometimes", `7:13: bad poll "sometimes": want auto (after every step) or manual (poll steps and the end)`},
		{"description", `7:1: description needs a line of text`},
		{"scenario x\nscenario y", `8:1: scenario given twice (first on line 7)`},
		{"seed -1", `7:6: bad seed "-1": expected a number (decimal or 0x hex)`},
		{"deadline 1ms\nat 2ms poll", `8:4: step at 2ms is after the deadline 1ms`},
		{"at 0 a.p modify", `7:10: modify needs an attribute, e.g. modify state=err`},
		{"at 0 a.p modify state=ready", `7:23: bad state "ready": want reset, init, rtr, rts, sqd, sqe or err`},
		{"at 0 a.p modify timeout=32", `7:25: timeout 32 out of range 0..31`},
		{"at 0 poll a.nothing", `7:11: unknown CQ or QP a.nothing`},
		{"at 0 a.p send wr=1 len=8 dest=b.q", `7:31: dest= is for UD QPs; a.p sends to its peer`},
		{"qp a.m rc group=239.1.1.1", `7:17: group= is for UD QPs: only a UD QP joins a multicast group`},
		{"qp a.m ud group=10.0.0.1", `7:17: bad group "10.0.0.1": want an IPv4 multicast address (224.0.0.0 to 239.255.255.255)`},
		{"at 0 a.p send wr=1 op=write len=8 group=239.1.1.1", `7:35: group= applies only to UD sends (op=send, op=send_imm)`},
		{"at 0 a.p send wr=1 op=write len=8 dest=b.q", `7:35: dest= applies only to UD sends (op=send, op=send_imm)`},
	} {
		_, err := scenario.Parse("bad.scenario", prelude+c.text+"\n")
		if !assert.Error(t, err, c.text) {
			continue
		}
		assert.Equal(t, c.want, err.Error(), c.text)
		var pe *scenario.ParseError
		if assert.True(t, errors.As(err, &pe), c.text) {
			assert.Equal(t, "bad.scenario", pe.File)
		}
	}
}

// TestRunRefusedStep: a step the verbs refuse stops the run with its line.
func TestRunRefusedStep(t *testing.T) {
	s, err := scenario.Parse("full", `node a b
link a b
mr a.buf size=64
qp a.q rc peer=b.q max_send_wr=1
qp b.q rc
fault drop src=a
at 0 a.q send wr=1 len=8
at 0 a.q send wr=2 len=8
`)
	require.NoError(t, err)
	_, err = s.Run(scenario.Options{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "scenario full: line 8: a.q send wr=2 len=8: ")
}

// ExampleScenario_Run runs the first scenario of the catalogue and prints
// its completions.
func ExampleScenario_Run() {
	s, _ := scenario.Lookup("go-back-n")
	res, err := s.Run(scenario.Options{Seed: 1})
	if err != nil {
		panic(err)
	}
	fmt.Println(s.Description)
	for _, c := range res.Completions {
		fmt.Println(c.Node, c.WRID, c.Status, c.Opcode, c.ByteLen)
	}
	fmt.Println("passed:", res.Passed(), "frames:", res.Frames, "time:", res.VirtualTime)
	// Output:
	// A 4-packet RC SEND loses PSN 2 (its 2nd packet) once: one sequence NAK, go-back-N from PSN 2, one cumulative ACK.
	// a 2 IBV_WC_SUCCESS IBV_WC_SEND 4096
	// b 1 IBV_WC_SUCCESS IBV_WC_RECV 4096
	// passed: true frames: 9 time: 4.459µs
}

// TestConcurrentRuns: a Scenario is read-only; runs on several goroutines
// give the same Result as one at a time.
func TestConcurrentRuns(t *testing.T) {
	all := scenario.Builtin()
	want := make([]string, len(all))
	for i, s := range all {
		res, err := s.Run(scenario.Options{})
		require.NoError(t, err)
		want[i] = res.Trace.Text()
	}
	got := make([]string, len(all))
	done := make(chan int)
	for i, s := range all {
		go func() {
			res, err := s.Run(scenario.Options{})
			if err == nil {
				got[i] = res.Trace.Text()
			}
			done <- i
		}()
	}
	for range all {
		<-done
	}
	assert.Equal(t, want, got)
}

// TestPackageDocExample: the file in the package documentation parses and
// passes.
func TestPackageDocExample(t *testing.T) {
	s, err := scenario.Parse("doc", `scenario go-back-n
description A 4-packet RC SEND loses PSN 2 once: NAK, go-back-N, one cumulative ACK.
node a b
link a b
mr a.buf size=4096 fill=seq
mr b.buf size=4096
qp a.q rc peer=b.q psn=1
qp b.q rc psn=1
fault drop psn=2 tx=1 src=a
at 0 b.q recv wr=1 len=4096
at 0 a.q send wr=2 op=send len=4096
expect a.q wr=2 IBV_WC_SUCCESS
expect counter a.rcvd_seq_err=1
`)
	require.NoError(t, err)
	res, err := s.Run(scenario.Options{})
	require.NoError(t, err)
	assert.Empty(t, res.Failed)
}

// TestWCFlagsClaim: flags= compares a completion's wc_flags exactly, and
// the flags differ by profile where rxe departs from libibverbs (nic
// package doc): every receive flagged IBV_WC_GRH, an invalidating receive
// IBV_WC_IP_CSUM_OK, the send side of an immediate IBV_WC_WITH_IMM.
func TestWCFlagsClaim(t *testing.T) {
	const text = `scenario flags
node a b
link a b
mr a.buf size=4096 fill=seq
mr b.buf size=4096 access=local_write,remote_write,mw_bind
mw b.win type=2
qp a.q rc peer=b.q
qp b.q rc
qp a.u ud
qp b.u ud
at 0 b.q send wr=9 op=bind mw=b.win local=b.buf+1024 len=1024 access=remote_write
at 0 b.q recv wr=20 len=512
at 0 b.q recv wr=21 len=512
at 0 b.q recv wr=22 len=512
at 0 b.q recv wr=24 len=512
at 0 b.u recv wr=23 len=512
at 1ms a.q send wr=1 op=send len=16
at 2ms a.q send wr=2 op=send_imm len=16 imm=7
at 3ms a.q send wr=3 op=write_imm len=16 remote=b.buf
at 4ms a.q send wr=4 op=send_inv len=16 mw=b.win
at 5ms a.u send wr=5 len=8 dest=b.u
expect a.q wr=1 SUCCESS flags=0
expect a.q wr=4 SUCCESS flags=0
expect a.u wr=5 SUCCESS flags=0
expect b.q wr=9 SUCCESS flags=0
expect b.u wr=23 SUCCESS flags=IBV_WC_GRH
expect a.q wr=2 SUCCESS flags=IBV_WC_WITH_IMM profile=rxe
expect a.q wr=3 SUCCESS flags=IBV_WC_WITH_IMM profile=rxe
expect b.q wr=20 SUCCESS flags=IBV_WC_GRH profile=rxe
expect b.q wr=21 SUCCESS flags=IBV_WC_GRH|IBV_WC_WITH_IMM profile=rxe
expect b.q wr=22 SUCCESS flags=IBV_WC_GRH|IBV_WC_WITH_IMM opcode=RECV_RDMA_WITH_IMM profile=rxe
expect b.q wr=24 SUCCESS flags=IBV_WC_GRH|IBV_WC_IP_CSUM_OK profile=rxe
expect a.q wr=2 SUCCESS flags=0 profile=spec
expect a.q wr=3 SUCCESS flags=0 profile=spec
expect b.q wr=20 SUCCESS flags=0 profile=spec
expect b.q wr=21 SUCCESS flags=WITH_IMM profile=spec
expect b.q wr=22 SUCCESS flags=IBV_WC_WITH_IMM profile=spec
expect b.q wr=24 SUCCESS flags=IBV_WC_WITH_INV profile=spec
`
	s, err := scenario.Parse("flags.scenario", text)
	require.NoError(t, err)
	for _, prof := range []verbs.Profile{verbs.ProfileRXE, verbs.ProfileSpec} {
		res, err := s.Run(scenario.Options{Profile: prof})
		require.NoError(t, err)
		assert.Equal(t, 11, res.Checked, prof)
		assert.Empty(t, res.Warnings, prof)
		assert.Empty(t, res.Failed, prof)
	}
}

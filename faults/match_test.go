package faults_test

import (
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rocesim/rocesim/faults"
	"github.com/rocesim/rocesim/wire"
)

// TestMatchKeys runs "drop KEYS" over the same traffic for each key and
// shows exactly which frames it hits; every frame not listed passed.
func TestMatchKeys(t *testing.T) {
	cases := []struct {
		keys string
		hit  []string
	}{
		// No keys: every frame on its first hop, never at the switch egress.
		{"", firstHops},

		{"link=a-sw", []string{"send1", "wfirst2", "wfirst2#2", "read3", "cas4", "arp"}},
		{"link=sw-b", []string{"send1@sw"}},
		{"link=sw-a", []string{"ack4@sw"}},
		{"link=nowhere", nil},

		{"dir=a->b", []string{"send1", "wfirst2", "wfirst2#2", "read3", "cas4"}},
		{"dir=b->a", []string{"ack1", "nak2", "rnr2", "rresp3", "aack4"}},
		{"dir=c->b", nil},
		{"link=sw-a dir=b->a", []string{"ack4@sw"}},

		{"src=c", []string{"ud100", "cnp"}},
		{"src=a", []string{"send1", "wfirst2", "wfirst2#2", "read3", "cas4", "arp"}},
		{"dst=a", []string{"ack1", "nak2", "rnr2", "rresp3", "aack4", "ud100", "cnp"}},
		{"src=b dst=a", []string{"ack1", "nak2", "rnr2", "rresp3", "aack4"}},

		{"qp=0x20", []string{"ud100", "cnp"}},
		{"qp=18", []string{"ack1", "nak2", "rnr2", "rresp3", "aack4"}},
		{"link=a-sw qp=0x11", []string{"send1", "wfirst2", "wfirst2#2", "read3", "cas4"}}, // not arp: no QPN

		{"op=RC_ACKNOWLEDGE", []string{"ack1", "nak2", "rnr2"}},
		{"op=rc_rdma_write_first", []string{"wfirst2", "wfirst2#2"}},
		{"op=0x0c", []string{"read3"}},
		{"op=129", []string{"cnp"}},

		{"class=request", []string{"send1", "wfirst2", "wfirst2#2", "read3", "cas4", "ud100"}},
		{"class=response", []string{"ack1", "nak2", "rnr2", "rresp3", "aack4"}},
		{"class=ack", []string{"ack1"}},
		{"class=nak", []string{"nak2"}},
		{"class=rnr", []string{"rnr2"}},
		{"class=read-response", []string{"rresp3"}},
		{"class=atomic", []string{"cas4", "aack4"}},
		{"class=ud", []string{"ud100"}},
		{"class=cnp", []string{"cnp"}},
		{"link=sw-b class=request", []string{"send1@sw"}},

		{"psn=2", []string{"wfirst2", "nak2", "rnr2", "wfirst2#2"}},
		{"psn=3-4", []string{"read3", "rresp3", "cas4", "aack4"}},
		{"psn=0", []string{"cnp"}},
		{"psn=16777200-1", []string{"send1", "ack1", "cnp"}}, // wraps through 0

		{"tx=1", []string{"send1", "wfirst2", "ack1", "nak2", "read3", "rresp3", "cas4", "aack4", "ud100", "cnp"}},
		{"tx=2", []string{"rnr2", "wfirst2#2"}},
		{"tx=2 class=request", []string{"wfirst2#2"}},

		{"from=1ms", []string{"wfirst2#2", "read3", "rresp3", "cas4", "aack4", "ud100", "cnp", "arp"}},
		{"to=1ms", []string{"send1", "wfirst2", "ack1", "nak2", "rnr2"}},
		{"from=1ms to=2ms", []string{"wfirst2#2", "read3", "rresp3", "cas4", "aack4"}},
		{"from=20us to=30us", []string{"ack1"}}, // from inclusive, to exclusive

		// Stateful keys count only frames that matched the other keys (the
		// 13 first hops here, or those of dir=b->a).
		{"nth=3", []string{"ack1", "wfirst2#2", "cas4", "cnp"}},
		{"nth=2 dir=b->a", []string{"nak2", "rresp3"}},
		{"first=2", []string{"send1", "wfirst2"}},
		{"first=2 class=nak", []string{"nak2"}},
		{"nth=2 first=2", []string{"wfirst2", "nak2"}},
		{"prob=1", firstHops},
	}
	for _, c := range cases {
		t.Run(c.keys, func(t *testing.T) {
			if !stateful.MatchString(c.keys) {
				// The same keys as a match alone select the same frames.
				m, err := faults.ParseMatch(c.keys)
				require.NoError(t, err)
				var sel []string
				for _, s := range traffic {
					_, pkt := s.frame(t)
					if m.Matches(s.now, &s.hop, pkt) {
						sel = append(sel, s.name)
					}
				}
				require.Equal(t, c.hit, sel, "ParseMatch(%q).Matches", c.keys)
			}
			in := faults.NewInjector(mustParse(t, "drop "+c.keys), newRand(1))
			hit, vs := run(t, in, traffic)
			require.Equal(t, c.hit, hit)
			for _, v := range vs {
				if v.Action != faults.Pass {
					require.Equal(t, faults.Drop, v.Action)
					require.Equal(t, 1, v.Rule)
				} else {
					require.Equal(t, faults.Verdict{}, v)
				}
			}
		})
	}
}

// TestFirstRuleWins: rules are tried in order and the first that matches
// acts; a later rule does not see the frame, and its counters do not move.
func TestFirstRuleWins(t *testing.T) {
	plan := mustParse(t, `
		delay 5us class=ack        # rule 1
		drop dir=b->a              # rule 2: sees b->a frames rule 1 did not take
		dup n=2 dir=b->a first=1   # rule 3: never reached for b->a
		corrupt link=sw-a          # rule 4: only at the switch egress
	`)
	in := faults.NewInjector(plan, newRand(1))
	_, vs := run(t, in, traffic)
	got := map[string]int{}
	for i, v := range vs {
		got[traffic[i].name] = v.Rule
	}
	require.Equal(t, map[string]int{
		"send1": 0, "send1@sw": 0, "wfirst2": 0, "ack1": 1, "nak2": 2, "rnr2": 2, "wfirst2#2": 0,
		"read3": 0, "rresp3": 2, "cas4": 0, "aack4": 2, "ud100": 0, "cnp": 0, "arp": 0, "ack4@sw": 4,
	}, got)
	require.Equal(t, uint64(1), in.Hits(1))
	require.Equal(t, uint64(4), in.Hits(2))
	require.Equal(t, uint64(0), in.Hits(3))
	require.Equal(t, uint64(1), in.Hits(4))
	require.Equal(t, uint64(0), in.Hits(5))
	require.Equal(t, "delay 5us class=ack", vs[3].Text)
	require.Equal(t, "delayed by rule 1: delay 5us class=ack", vs[3].String())
	require.Equal(t, "passed", vs[0].String())
}

// TestNilPlan: no plan, or a nil injector, passes everything and keeps
// every link up.
func TestNilPlan(t *testing.T) {
	for _, in := range []*faults.Injector{faults.NewInjector(nil, nil), nil} {
		hit, _ := run(t, in, traffic)
		require.Empty(t, hit)
		require.True(t, in.LinkUp(0, "a-sw"))
		require.False(t, in.Partitioned(0, "a", "b"))
	}
	require.Nil(t, (*faults.Plan)(nil).Changes())
	require.Equal(t, "", (*faults.Plan)(nil).String())
}

var stateful = regexp.MustCompile(`\b(nth|prob|first)=`)

// TestParseMatchErrors: a match is one line of deterministic keys; what
// is not is refused with the column of the fault.
func TestParseMatchErrors(t *testing.T) {
	for _, c := range []struct{ text, err string }{
		{"nth=2", "1:1: nth=, prob= and first= count frames"},
		{"class=nak first=1", "1:1: nth=, prob= and first="},
		{"psn=2 bogus=1", "1:7: "},
		{"class=nope", "1:7: "}, // the value, not the key
		{"psn=x", `1:5: bad psn "x"`},
		{"qp=0x11 psn=1-x", `1:13: bad psn "1-x"`},
		{"psn=1\npsn=2", "one line of keys"},
		{"psn=1 # two", "without comments"},
	} {
		_, err := faults.ParseMatch(c.text)
		require.ErrorContains(t, err, c.err, c.text)
		var pe *faults.ParseError
		require.ErrorAs(t, err, &pe)
		require.GreaterOrEqual(t, pe.Col, 1)
	}
}

// cmMAD returns a 256-byte MAD of management class class carrying
// attribute attr, sent with method.
func cmMAD(class, method uint8, attr wire.CMAttr) []byte {
	m := wire.MAD(make([]byte, wire.MADLen))
	m.SetHeader(&wire.MADHeader{BaseVersion: wire.MADBaseVersion, MgmtClass: class, ClassVersion: wire.MADClassVersion,
		Method: method, TransactionID: 2 << 32, AttributeID: uint16(attr)})
	return m
}

// TestMatchCM: cm= picks CM MADs by message (SIDR's too), and nothing else: not a MAD
// of another class, not another method, not a CM-looking payload to a QP
// other than QP1, not an RC frame.
func TestMatchCM(t *testing.T) {
	hop := faults.Hop{Link: "a-b", From: "a", To: "b", First: true, Tx: 1}
	gsi := func(payload []byte) *pktSpec {
		return &pktSpec{op: wire.OpUDSendOnly, psn: 7, qp: wire.GSIQPN, payload: payload}
	}
	frames := []sent{
		{"req", 0, hop, gsi(cmMAD(wire.MADClassCM, wire.MADMethodSend, wire.CMAttrREQ))},
		{"rep", 0, hop, gsi(cmMAD(wire.MADClassCM, wire.MADMethodSend, wire.CMAttrREP))},
		{"rtu", 0, hop, gsi(cmMAD(wire.MADClassCM, wire.MADMethodSend, wire.CMAttrRTU))},
		{"dreq", 0, hop, gsi(cmMAD(wire.MADClassCM, wire.MADMethodSend, wire.CMAttrDREQ))},
		{"sidr-req", 0, hop, gsi(cmMAD(wire.MADClassCM, wire.MADMethodSend, wire.CMAttrSIDRREQ))},
		{"sa-req-attr", 0, hop, gsi(cmMAD(0x03, wire.MADMethodSend, wire.CMAttrREQ))}, // an SA MAD, attribute 0x10
		{"get-req-attr", 0, hop, gsi(cmMAD(wire.MADClassCM, 0x01, wire.CMAttrREQ))},   // a Get
		{"short", 0, hop, gsi(cmMAD(wire.MADClassCM, wire.MADMethodSend, wire.CMAttrREQ)[:64])},
		{"ud-qp20", 0, hop, &pktSpec{op: wire.OpUDSendOnly, psn: 7, qp: 0x20, payload: cmMAD(wire.MADClassCM, wire.MADMethodSend, wire.CMAttrREQ)}},
		{"rc", 0, hop, &pktSpec{op: wire.OpRCSendOnly, psn: 7, qp: wire.GSIQPN, payload: cmMAD(wire.MADClassCM, wire.MADMethodSend, wire.CMAttrREQ)}},
		{"arp", 0, hop, nil},
	}
	for _, c := range []struct {
		keys string
		hit  []string
	}{
		{"cm=REQ", []string{"req"}},
		{"cm=rep", []string{"rep"}},
		{"cm=RTU src=a", []string{"rtu"}},
		{"cm=DREQ src=b", nil},
		{"cm=REJ", nil},
		// udaddy's Service ID Resolution, named as the trace names it.
		{"cm=SIDR_REQ", []string{"sidr-req"}},
		{"cm=sidr_rep", nil},
		{"class=ud qp=1", []string{"req", "rep", "rtu", "dreq", "sidr-req", "sa-req-attr", "get-req-attr", "short"}},
	} {
		m, err := faults.ParseMatch(c.keys)
		require.NoError(t, err, c.keys)
		var sel []string
		for _, s := range frames {
			_, pkt := s.frame(t)
			if m.Matches(s.now, &s.hop, pkt) {
				sel = append(sel, s.name)
			}
		}
		require.Equal(t, c.hit, sel, c.keys)
		in := faults.NewInjector(mustParse(t, "drop "+c.keys), newRand(1))
		hit, _ := run(t, in, frames)
		require.Equal(t, c.hit, hit, c.keys)
	}
	// The key prints as it parses, upper case.
	require.Equal(t, "drop cm=RTU first=1\n", mustParse(t, "drop cm=rtu first=1").String())
	_, err := faults.Parse("drop cm=REQUEST")
	require.ErrorContains(t, err, "1:9: bad cm")
	require.ErrorContains(t, err, "REQ, MRA, REJ, REP, RTU, DREQ, DREP, LAP, APR, SIDR_REQ or SIDR_REP")
	bad := faults.Plan{Rules: []faults.Rule{{Action: faults.Drop, Match: faults.Match{CM: 0x99}}}}
	require.ErrorContains(t, bad.Validate(), "unknown cm message CM(0x0099)")
}

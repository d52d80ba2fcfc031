package conformance

import (
	"slices"
	"testing"
)

// sidrPhases: udaddy (rdmacm-utils), UD QPs connected through rdma_cm's
// RDMA_PS_UDP, which is Service ID Resolution on the wire: VM a
// (10.0.0.1) runs the udaddy server in a loop, VM b the client; and
// conformance/agent/cmagent.c's UDP client against no listener and
// against its rejecter. The
// captures are the test vectors of the model's SIDR (rdmacm/sidr.go,
// wire/sidr.go).
var sidrPhases = []cmPhase{
	{name: "sidr_udaddy", client: "udaddy -s $rxe_peer", want: "return status 0",
		cm: []string{"b>SIDR_REQ", "a>SIDR_REP"}},
	// The first SIDR_REQ lost: the MAD layer sends it again.
	{name: "sidr_lost_req", plan: "drop src=b qp=1 first=1", client: "udaddy -s $rxe_peer", want: "return status 0",
		cm: []string{"b>SIDR_REQ(dropped)", "b>SIDR_REQ", "a>SIDR_REP"}},
	// No UDP listener on the port: the server's CM answers itself.
	{name: "sidr_no_listener", client: CMAgentPath + " udpclient $rxe_peer 7999 0 0", want: "client event RDMA_CM_EVENT_UNREACHABLE",
		cm: []string{"b>SIDR_REQ", "a>SIDR_REP"}},
	// The server's application rejects (rdma_reject on a UD ID).
	{name: "sidr_reject", client: CMAgentPath + " udpclient $rxe_peer 7473 0 0", want: "client event RDMA_CM_EVENT_UNREACHABLE",
		cm: []string{"b>SIDR_REQ", "a>SIDR_REP"}},
	// The server's every MAD lost: the SIDR_REQ is sent until the CM
	// gives up, 1 + max_cm_retries (15) times, and udaddy gets
	// UNREACHABLE -110. The server accepted the first (its SIDR_REP
	// lost); the resent ones are new requests to ib_cm, which it
	// forgot once it answered, but the server no longer reads CM events
	// (it waits for data), so they go unanswered.
	{name: "sidr_unreachable", plan: "drop src=a qp=1", client: "udaddy -s $rxe_peer", want: "RDMA_CM_EVENT_UNREACHABLE, error: -110",
		cm: append([]string{"b>SIDR_REQ", "a>SIDR_REP(dropped)"}, slices.Repeat([]string{"b>SIDR_REQ"}, 15)...)},
}

// TestUdaddySIDR runs udaddy between two rxe guests through the fault
// switch, one phase per entry of sidrPhases, as TestRpingCM does rping
// (with -cm.update the captures go to wire/testdata/cm/).
func TestUdaddySIDR(t *testing.T) {
	server := `(while true; do ` + CMAgentPath + ` udpreject $rxe_ip 7473 0 0; echo "SIDR-REJECT-DONE $?"; sleep 1; done) &
while true; do udaddy -b $rxe_ip; echo SIDR-SERVER-DONE $?; done`
	// The warm-up sends udaddy's default 10 messages: the server waits
	// for as many as it is told (-C), 10 unless told.
	runCMPhases(t, server, "udaddy -s $rxe_peer", sidrPhases)
}

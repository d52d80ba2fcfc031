package conformance

// The verbs agent's side on the host: the guest runs AgentPath on a
// script (see AgentScript), the agent prints JSON lines on the console,
// and ParseAgentOutput picks them out of it.

import (
	"encoding/json"
	"fmt"
	"strings"
)

// AgentEvent is one JSON line the agent prints. Event names the command
// that printed it ("wc" for a work completion, "error" for the failure
// that stopped the agent); the other fields are set as that event has
// them.
type AgentEvent struct {
	Event string `json:"event"`

	// wc: one work completion, status and opcode by their libibverbs
	// names (IBV_WC_SUCCESS, IBV_WC_RECV_RDMA_WITH_IMM, ...). Imm is in
	// host order, zero when the completion carries none.
	WRID    uint64 `json:"wr_id"`
	Status  string `json:"status"`
	Opcode  string `json:"opcode"`
	ByteLen uint32 `json:"byte_len"`
	Imm     uint32 `json:"imm"`
	// WCFlags are the completion's wc_flags as the provider set them, Ex
	// the union after byte_len raw (the invalidated R_Key of a SEND WITH
	// INVALIDATE; rxe flags it with the kernel's IB_WC_WITH_INVALIDATE,
	// 1<<2, not libibverbs' IBV_WC_WITH_INV, 1<<3).
	WCFlags uint32 `json:"wc_flags"`
	Ex      uint32 `json:"ex"`

	// info, exchange: a QP's number, initial PSN, GID (8 groups of 4 hex
	// digits) and its MR's address and rkey.
	QPN  uint32 `json:"qpn"`
	PSN  uint32 `json:"psn"`
	GID  string `json:"gid"`
	Addr uint64 `json:"addr"`
	RKey uint32 `json:"rkey"`

	// dump, crc: an MR range, as hex or as its CRC-32 (IEEE).
	Off   uint64 `json:"off"`
	Len   uint64 `json:"len"`
	Hex   string `json:"hex"`
	CRC32 uint32 `json:"crc32"`

	// mr, cq: the object's name; mr: lkey (rkey and addr above); cq: the
	// entries the device gave it.
	Name string `json:"name"`
	LKey uint32 `json:"lkey"`
	CQE  int    `json:"cqe"`

	// rereg: ibv_rereg_mr's return value (0, or an
	// IBV_REREG_MR_ERR_* code) and errno, with lkey and rkey above.
	Ret   int `json:"ret"`
	Errno int `json:"errno"`

	// destroy_cq: ibv_destroy_cq had not returned within the command's
	// wait (1): libibverbs waits for the events read to be acknowledged.
	Blocked int `json:"blocked"`

	// open: the device's completion vectors (num_comp_vectors).
	CompVectors int `json:"comp_vectors"`

	// gid_table: the entries ibv_query_gid_table gave.
	N int `json:"n"`

	// reset_post: what the posts returned, as text.
	Detail string `json:"detail"`

	// device_ex: phys_port_cnt and phys_port_cnt_ex.
	Ports   int `json:"ports"`
	PortsEx int `json:"ports_ex"`

	// async: the event's libibverbs name and the QP it concerns.
	Type string `json:"type"`

	// error, ok: the script line (interactive: the command's sequence
	// number) and command, and for error why it failed.
	Line  int    `json:"line"`
	Cmd   string `json:"cmd"`
	Error string `json:"error"`
}

// agentPrefix starts every line the agent prints.
const agentPrefix = `{"event":`

// ParseAgentOutput returns the agent's events in the console output, in
// order. Other console lines are skipped; an agent line that does not
// parse (a kernel message written into the middle of it, say) is an
// error.
func ParseAgentOutput(console string) ([]AgentEvent, error) {
	var evs []AgentEvent
	for n, line := range strings.Split(console, "\n") {
		i := strings.Index(line, agentPrefix)
		if i < 0 {
			continue
		}
		var ev AgentEvent
		if err := json.Unmarshal([]byte(line[i:]), &ev); err != nil {
			return evs, fmt.Errorf("conformance: console line %d: %v: %q", n+1, err, line)
		}
		evs = append(evs, ev)
	}
	return evs, nil
}

// AgentPattern returns the n bytes the agent's "mr len=n seed=seed" fills
// its buffer with: byte i is (seed + 7i) mod 256.
func AgentPattern(seed, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(seed + i*7)
	}
	return b
}

// AgentScript returns a guest shell command that runs the agent on script.
// The script is expanded by the guest's shell, so it may use $RXE_GID,
// $rxe_ip and $rxe_peer.
func AgentScript(script string) string {
	return "cat > /tmp/agent.script <<ROCESIM_AGENT_EOF\n" + script + "\nROCESIM_AGENT_EOF\n" + AgentPath + " /tmp/agent.script"
}

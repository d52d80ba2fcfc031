package scenario_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocesim/rocesim/nic"
	"github.com/rocesim/rocesim/scenario"
	"github.com/rocesim/rocesim/sim"
)

// TestProgramOfBuiltins: every two-node RC built-in becomes a Program
// whose shape follows its file; the others are refused with their line.
func TestProgramOfBuiltins(t *testing.T) {
	tests := []struct {
		name         string
		steps        int    // program steps
		faults       string // canonical plan
		psnA, psnB   uint32
		cqsA, cqsB   int
		mrsA, mrsB   int
		errSubstring string
	}{
		{name: "go-back-n", steps: 2, faults: "drop src=a psn=2 tx=1\n", psnA: 1, psnB: 1, cqsA: 1, cqsB: 1, mrsA: 1, mrsB: 1},
		{name: "ack-timeout", steps: 2, faults: "drop src=a psn=2 tx=1\n", psnA: 1, psnB: 1, cqsA: 1, cqsB: 1, mrsA: 1, mrsB: 1},
		{name: "retry-exceeded", steps: 8, faults: "down link=a-b from=10us\n", psnA: 1, psnB: 1, cqsA: 1, cqsB: 1, mrsA: 1, mrsB: 1},
		{name: "rnr", steps: 2, psnA: 1, psnB: 1, cqsA: 1, cqsB: 1, mrsA: 1, mrsB: 1},
		{name: "rnr-exceeded", steps: 2, psnA: 1, psnB: 1, cqsA: 1, cqsB: 1, mrsA: 1, mrsB: 1},
		{name: "cq-overflow", steps: 20, psnA: 1, psnB: 1, cqsA: 1, cqsB: 2, mrsA: 1, mrsB: 1},
		{name: "remote-access-error", steps: 3, psnA: 1, psnB: 1, cqsA: 1, cqsB: 1, mrsA: 1, mrsB: 1},
		{name: "read-atomic", steps: 3, faults: "drop op=RC_RDMA_READ_RESPONSE_MIDDLE tx=1\ndrop op=RC_ATOMIC_ACKNOWLEDGE tx=1\n", psnA: 1, psnB: 1, cqsA: 1, cqsB: 1, mrsA: 2, mrsB: 2},
		{name: "duplicate", steps: 7, faults: "dup n=2 src=a\n", psnA: 1, psnB: 1, cqsA: 1, cqsB: 1, mrsA: 1, mrsB: 1},
		{name: "ack-loss", steps: 4, faults: "drop class=ack first=1\n", psnA: 1, psnB: 1, cqsA: 1, cqsB: 1, mrsA: 1, mrsB: 1},
		{name: "psn-wrap", steps: 2, faults: "drop src=a psn=0 tx=1\n", psnA: 16777214, psnB: 7, cqsA: 1, cqsB: 1, mrsA: 1, mrsB: 1},
		{name: "unsignaled", steps: 16, psnA: 1, psnB: 1, cqsA: 1, cqsB: 1, mrsA: 1, mrsB: 1},
		{name: "uc-loss", steps: 5, faults: "drop src=a op=UC_SEND_MIDDLE\n", psnA: 10, psnB: 1, cqsA: 1, cqsB: 1, mrsA: 1, mrsB: 1},
		{name: "alltoall", errSubstring: "line 9: not a two-node program: 4 nodes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, ok := scenario.Lookup(tt.name)
			require.True(t, ok)
			p, err := s.Program()
			if tt.errSubstring != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.errSubstring)
				assert.Nil(t, p)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.name, p.Name)
			assert.Equal(t, "a-b", p.Link)
			assert.Equal(t, tt.faults, p.Faults)
			assert.Equal(t, uint64(1), p.Seed)
			require.Len(t, p.Nodes, 2)
			assert.Equal(t, "a", p.Nodes[0].Name)
			assert.Equal(t, "b", p.Nodes[1].Name)
			assert.Equal(t, tt.psnA, p.Nodes[0].QP.PSN)
			assert.Equal(t, tt.psnB, p.Nodes[1].QP.PSN)
			assert.Len(t, p.Nodes[0].CQs, tt.cqsA)
			assert.Len(t, p.Nodes[1].CQs, tt.cqsB)
			assert.Len(t, p.Nodes[0].MRs, tt.mrsA)
			assert.Len(t, p.Nodes[1].MRs, tt.mrsB)
			assert.Len(t, p.Steps, tt.steps)
			for _, n := range p.Nodes {
				assert.Contains(t, []int{0, len(n.CQs) - 1}, n.QP.SendCQ, n.Name)
				assert.Less(t, n.QP.RecvCQ, len(n.CQs), n.Name)
			}
			last := sim.Duration(0)
			for _, st := range p.Steps {
				assert.GreaterOrEqual(t, st.At, last, "steps in time order")
				last = st.At
				assert.Contains(t, []string{scenario.StepSend, scenario.StepRecv, scenario.StepPoll}, st.Kind)
				if st.Len > 0 {
					require.GreaterOrEqual(t, st.LocalMR, 0, "line %d", st.Line)
					assert.LessOrEqual(t, st.LocalOff+st.Len, uint64(len(p.Nodes[st.Node].MRs[st.LocalMR].Init)), "line %d", st.Line)
				} else {
					assert.Equal(t, -1, st.LocalMR, "line %d", st.Line)
				}
				if st.Kind == scenario.StepSend && st.Op != "send" && st.Op != "send_imm" {
					peer := p.Nodes[1-st.Node]
					require.GreaterOrEqual(t, st.RemoteMR, 0, "line %d", st.Line)
					assert.LessOrEqual(t, st.RemoteOff+st.Len, uint64(len(peer.MRs[st.RemoteMR].Init)), "line %d", st.Line)
				} else {
					assert.Equal(t, -1, st.RemoteMR, "line %d", st.Line)
				}
			}
		})
	}
}

// TestProgramGoBackN checks every field of one program against its file.
func TestProgramGoBackN(t *testing.T) {
	s, _ := scenario.Lookup("go-back-n")
	p, err := s.Program()
	require.NoError(t, err)
	seq := make([]byte, 4096)
	for i := range seq {
		seq[i] = byte(i)
	}
	all := nic.AccessLocalWrite | nic.AccessRemoteWrite | nic.AccessRemoteRead | nic.AccessRemoteAtomic
	qp := scenario.ProgramQP{Name: "q", Type: nic.QPTypeRC, PSN: 1, Timeout: 14, RetryCnt: 7, RNRRetry: 7, MinRNRTimer: 12,
		MaxRdAtomic: 1, MaxDestRdAtomic: 1, Access: nic.AccessRemoteWrite | nic.AccessRemoteRead | nic.AccessRemoteAtomic,
		MaxSendWR: 64, MaxRecvWR: 64, MaxSGE: 1}
	want := &scenario.Program{
		Name: "go-back-n", Faults: "drop src=a psn=2 tx=1\n", Link: "a-b", Seed: 1,
		Nodes: []scenario.ProgramNode{
			{Name: "a", MRs: []scenario.ProgramMR{{Name: "buf", Init: seq, Access: all}},
				CQs: []scenario.ProgramCQ{{Name: "q/cq", Size: 254}}, QP: qp},
			{Name: "b", MRs: []scenario.ProgramMR{{Name: "buf", Init: make([]byte, 4096), Access: all}},
				CQs: []scenario.ProgramCQ{{Name: "q/cq", Size: 254}}, QP: qp},
		},
		Steps: []scenario.ProgramStep{
			{Line: 16, Node: 1, Kind: "recv", WRID: 1, Len: 4096, LocalMR: 0, RemoteMR: -1, MW: -1},
			{Line: 17, Node: 0, Kind: "send", WRID: 2, Op: "send", Len: 4096, LocalMR: 0, RemoteMR: -1, MW: -1, Flags: nic.SendSignaled},
		},
	}
	// The bytes apart, so that a failure prints a readable diff.
	assert.Equal(t, seq, p.Nodes[0].MRs[0].Init)
	assert.Equal(t, make([]byte, 4096), p.Nodes[1].MRs[0].Init)
	for i := range want.Nodes {
		want.Nodes[i].MRs[0].Init, p.Nodes[i].MRs[0].Init = nil, nil
	}
	assert.Equal(t, want, p)
}

// TestProgramSteps covers what the built-ins do not: a poll of both
// nodes, a poll of named CQs, imm, atomics and flags, a zero-length send.
func TestProgramSteps(t *testing.T) {
	s, err := scenario.Parse("t", `
node a b
link b a delay=5us
mr a.x size=64
mr a.y size=64 fill=7 u64=0x0102
mr b.z size=32 fill=random access=remote_atomic,local_write
cq a.c size=4 poll=manual
qp a.q rc peer=b.q psn=0x10 cq=c mtu=512 sig_all
qp b.q rc psn=5 timeout=18 retry_cnt=3 rnr_retry=2 min_rnr_timer=30 max_dest_rd_atomic=4 max_inline=64
fault drop op=RC_SEND_ONLY
at 0 a.q send wr=1 op=send_imm len=0 imm=9 solicited
at 1ms b.q send wr=2 op=faa local=b.z+8 remote=a.y add=3 fence
at 2ms a.q send wr=3 op=cas remote=b.z+16 compare=1 swap=2 unsignaled
at 3ms a.q send wr=4 op=write_imm len=8 local=a.y+8 remote=b.z rkey=invalid imm=1
at 4ms poll
at 5ms poll b.q a.c a.q
deadline 1s
`)
	require.NoError(t, err)
	p, err := s.Program()
	require.NoError(t, err)
	assert.Equal(t, "b-a", p.Link)
	assert.Equal(t, sim.Duration(1e9), p.Deadline)
	a, b := p.Nodes[0], p.Nodes[1]
	assert.Equal(t, []scenario.ProgramCQ{{Name: "c", Size: 4, Manual: true}}, a.CQs)
	assert.Equal(t, scenario.ProgramQP{Name: "q", Type: nic.QPTypeRC, PSN: 16, PathMTU: 512, Timeout: 14, RetryCnt: 7, RNRRetry: 7,
		MinRNRTimer: 12, MaxRdAtomic: 1, MaxDestRdAtomic: 1, Access: nic.AccessRemoteWrite | nic.AccessRemoteRead | nic.AccessRemoteAtomic,
		MaxSendWR: 64, MaxRecvWR: 64, MaxSGE: 1, SigAll: true}, a.QP)
	assert.Equal(t, scenario.ProgramQP{Name: "q", Type: nic.QPTypeRC, PSN: 5, Timeout: 18, RetryCnt: 3, RNRRetry: 2,
		MinRNRTimer: 30, MaxRdAtomic: 1, MaxDestRdAtomic: 4, Access: nic.AccessRemoteWrite | nic.AccessRemoteRead | nic.AccessRemoteAtomic,
		MaxSendWR: 64, MaxRecvWR: 64, MaxSGE: 1, MaxInline: 64}, b.QP)
	assert.Equal(t, append([]byte{2, 1, 0, 0, 0, 0, 0, 0}, bytes.Repeat([]byte{7}, 56)...), a.MRs[1].Init)
	assert.Equal(t, nic.AccessRemoteAtomic|nic.AccessLocalWrite, b.MRs[0].Access)
	assert.Equal(t, "drop op=RC_SEND_ONLY\n", p.Faults)

	want := []scenario.ProgramStep{
		{Line: 11, Node: 0, Kind: "send", WRID: 1, Op: "send_imm", LocalMR: -1, RemoteMR: -1, MW: -1, Imm: 9, Flags: nic.SendSignaled | nic.SendSolicited},
		{At: 1e6, Line: 12, Node: 1, Kind: "send", WRID: 2, Op: "faa", Len: 8, LocalMR: 0, LocalOff: 8, RemoteMR: 1, MW: -1, SwapAdd: 3, Flags: nic.SendSignaled | nic.SendFence},
		{At: 2e6, Line: 13, Node: 0, Kind: "send", WRID: 3, Op: "cas", Len: 8, LocalMR: 0, RemoteMR: 0, MW: -1, RemoteOff: 16, Compare: 1, SwapAdd: 2},
		{At: 3e6, Line: 14, Node: 0, Kind: "send", WRID: 4, Op: "write_imm", Len: 8, LocalMR: 1, LocalOff: 8, RemoteMR: 0, MW: -1, BadRKey: true, Imm: 1, Flags: nic.SendSignaled},
		{At: 4e6, Line: 15, Node: 0, Kind: "poll", LocalMR: -1, RemoteMR: -1, MW: -1},
		{At: 4e6, Line: 15, Node: 1, Kind: "poll", LocalMR: -1, RemoteMR: -1, MW: -1},
		{At: 5e6, Line: 16, Node: 1, Kind: "poll", LocalMR: -1, RemoteMR: -1, MW: -1, PollCQs: []int{0}},
		{At: 5e6, Line: 16, Node: 0, Kind: "poll", LocalMR: -1, RemoteMR: -1, MW: -1, PollCQs: []int{0, 0}},
	}
	assert.Equal(t, want, p.Steps)

	// fill=random: the bytes a run registers (b.z is written by nothing
	// but the unsignaled CAS at +16, which fails its compare).
	res, err := s.Run(scenario.Options{})
	require.NoError(t, err)
	require.Len(t, res.Memory, 3)
	assert.Equal(t, "b.z", res.Memory[2].Name)
	assert.Equal(t, b.MRs[0].Init[:8], res.Memory[2].Bytes[:8])
	assert.NotEqual(t, make([]byte, 32), b.MRs[0].Init)
}

// TestProgramRefuses: what a two-node RC program cannot express fails
// with the line and the feature.
func TestProgramRefuses(t *testing.T) {
	base := "node a b\nlink a b\nmr a.m size=64\nmr b.m size=64\nqp a.q rc peer=b.q\nqp b.q rc\n"
	tests := []struct {
		name, text, err string
	}{
		{"modify", base + "at 0 a.q modify state=err\n", "line 7: not a two-node program: a modify step (a.q modify state=err)"},
		{"numeric rkey", base + "at 0 a.q send wr=1 op=write len=8 rkey=0x1234\n", "line 7: not a two-node program: an explicit rkey=0x1234"},
		{"two QPs", "node a b\nlink a b\nqp a.q rc peer=b.q\nqp b.q rc\nqp a.r rc peer=b.r\nqp b.r rc\n", "line 5: not a two-node program: 2 QPs on node a"},
		{"no QP", "node a b\nlink a b\n", "line 1: not a two-node program: 0 QPs on node a"},
		{"UD", "node a b\nlink a b\nqp a.q ud\nqp b.q ud\n", "line 3: not a two-node program: UD QP a.q (a program has RC or UC QPs only)"},
		{"switch", "node a b\nswitch sw a b\nqp a.q rc peer=b.q\nqp b.q rc\n", "line 2: not a two-node program: switch sw"},
		{"three nodes", "node a b\nnode c\nlink a b\nlink c a\n", ""}, // a parse error: a is already attached
		{"link mtu", "node a b\nlink a b mtu=9000\nqp a.q rc peer=b.q\nqp b.q rc\n", "line 2: not a two-node program: link mtu=9000"},
		{"link queue", "node a b\nlink a b queue=4KiB\nqp a.q rc peer=b.q\nqp b.q rc\n", "line 2: not a two-node program: link queue=4096"},
		{"state", "node a b\nlink a b\nqp a.q rc peer=b.q state=init\nqp b.q rc\n", "line 3: not a two-node program: QP a.q starting in INIT"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := scenario.Parse(tt.name, tt.text)
			if tt.err == "" {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			_, err = s.Program()
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.err)
			assert.True(t, strings.HasPrefix(err.Error(), "scenario "+tt.name+": line "), err.Error())
		})
	}
	s, err := scenario.Parse("three", "node a b c\nswitch sw a b c\n")
	require.NoError(t, err)
	_, err = s.Program()
	require.ErrorContains(t, err, "line 1: not a two-node program: 3 nodes")
}

// TestResultMemory: every region's final bytes, in declaration order.
func TestResultMemory(t *testing.T) {
	s, _ := scenario.Lookup("read-atomic")
	res, err := s.Run(scenario.Options{})
	require.NoError(t, err)
	var names []string
	for _, m := range res.Memory {
		names = append(names, m.Name)
	}
	assert.Equal(t, []string{"a.buf", "a.res", "b.buf", "b.ctr"}, names)
	assert.Equal(t, res.Memory[2].Bytes[:3000], res.Memory[0].Bytes[1000:4000])
	assert.Equal(t, []byte{100, 0, 0, 0, 0, 0, 0, 0}, res.Memory[3].Bytes)
	p, err := s.Program()
	require.NoError(t, err)
	assert.Equal(t, p.Nodes[1].MRs[0].Init, res.Memory[2].Bytes, "b.buf (fill=random) is only read")
}

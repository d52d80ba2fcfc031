package scenario_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocesim/rocesim/nic"
	"github.com/rocesim/rocesim/scenario"
	"github.com/rocesim/rocesim/verbs"
)

// reregScenario reregisters b.buf (registered LOCAL_WRITE only) three
// ways, then WRITEs to it: under the rxe profile every rereg is refused
// (rxe 6.1 has no rereg_user_mr) and the WRITE meets the old rights;
// under the spec profile the reregs happen and the WRITE lands in the
// second half of the buffer, the translation of the last rereg.
const reregScenario = `node a b
link a b
mr a.buf size=4096 fill=seq
mr b.buf size=4096 access=local_write
qp a.q rc peer=b.q psn=1
qp b.q rc psn=1
at 0 b.buf rereg access=local_write,remote_write   # line 7
at 1us b.buf rereg pd=other                        # line 8
at 2us b.buf rereg pd=own off=2048 len=2KiB        # line 9
at 1ms a.q send wr=1 op=write len=64 remote=b.buf
expect rereg b.buf EOPNOTSUPP EOPNOTSUPP EOPNOTSUPP profile=rxe
expect rereg b.buf ok ok ok profile=spec
expect a.q completions 1:REM_ACCESS_ERR profile=rxe
expect a.q completions 1:SUCCESS profile=spec
expect mem b.buf u64=0
expect mem b.buf+2048 len=64 equals=a.buf profile=spec
`

// TestReregStepBothProfiles: a rereg step is answered per profile, the
// answer is in Result.Rereg, and a refusal does not end the run.
func TestReregStepBothProfiles(t *testing.T) {
	s, err := scenario.Parse("rereg", reregScenario)
	require.NoError(t, err)
	for _, c := range []struct {
		profile nic.Profile
		answer  string
	}{{verbs.ProfileRXE, "EOPNOTSUPP"}, {verbs.ProfileSpec, "ok"}} {
		res, err := s.Run(scenario.Options{Profile: c.profile})
		require.NoError(t, err, c.profile)
		assert.Empty(t, res.Failed, c.profile)
		assert.Equal(t, []scenario.Rereg{{Line: 7, MR: "b.buf", Errno: c.answer}, {Line: 8, MR: "b.buf", Errno: c.answer},
			{Line: 9, MR: "b.buf", Errno: c.answer}}, res.Rereg, c.profile)
		// The region stays the declared buffer in Result.Memory.
		assert.Len(t, res.Memory[1].Bytes, 4096)
	}
}

// TestReregExpectationFails: a wrong rereg claim says what happened.
func TestReregExpectationFails(t *testing.T) {
	s, err := scenario.Parse("rereg", `node a b
link a b
mr b.buf size=64
qp a.q rc peer=b.q
qp b.q rc
at 0 b.buf rereg access=local_write
expect rereg b.buf ok
`)
	require.NoError(t, err)
	res, err := s.Run(scenario.Options{Profile: verbs.ProfileRXE})
	require.NoError(t, err)
	assert.Equal(t, []string{"line 7: expect rereg b.buf ok: got EOPNOTSUPP"}, res.Failed)
	res, err = s.Run(scenario.Options{Profile: verbs.ProfileSpec})
	require.NoError(t, err)
	assert.Empty(t, res.Failed)
}

// TestReregParseErrors: bad rereg steps and claims, with their positions.
func TestReregParseErrors(t *testing.T) {
	const prelude = "node a b\nlink a b\nmr a.buf size=64\nmr b.buf size=64\nqp b.q rc peer=a.p\nqp a.p rc\n" // lines 1-6
	for _, c := range []struct{ text, want string }{
		{"at 0 a.buf rereg", `7:12: rereg needs access=, pd= or len=, e.g. a.buf rereg access=local_write,remote_write`},
		{"at 0 a.buf rereg access=remote_wrote", `7:25: bad access "remote_wrote": want local_write, remote_write, remote_read, remote_atomic, mw_bind (comma-separated) or none`},
		{"at 0 a.buf rereg pd=mine", `7:21: bad pd "mine": want own (the node's PD) or other (a second PD of the node)`},
		{"at 0 a.buf rereg off=8 access=none", `7:18: off= needs len=: the new translation is [off, off+len) of the region's buffer`},
		{"at 0 a.buf rereg len=0", `7:12: rereg len=0: a translation needs at least one byte`},
		{"at 0 a.buf rereg off=32 len=64", `7:6: rereg off=32 len=64 is past the end of a.buf (64 bytes): the new translation is a part of the region's buffer`},
		{"at 0 a.buf rereg flags=4", `7:18: unknown key "flags" in rereg (want access=, len=, off=, pd=)`},
		{"at 0 a.buf rereg access=none access=none", `7:30: duplicate key "access"`},
		{"at 0 a.nope rereg access=none", `7:6: unknown memory region a.nope (declare it with mr a.nope size=N)`},
		{"at 0 a.buf rereged", `7:12: unknown step "rereged" (want send, recv, modify, poll or rereg)`},
		{"expect rereg a.buf", `7:8: rereg needs a memory region and the answers of its rereg steps in order, e.g. expect rereg b.buf EOPNOTSUPP`},
		{"expect rereg a.buf ok ENOTSUP", `7:23: bad rereg answer "ENOTSUP": want ok or an errno (EOPNOTSUPP, EINVAL, ENOMEM, EACCES, EPERM, EFAULT, EBUSY, ENOSYS)`},
		{"expect rereg abuf ok", `7:14: expected a memory region as node.name, got "abuf"`},
		{"expect rereg b.q ok", `7:14: unknown memory region b.q (declare it with mr b.q size=N)`},
		{"expect rereg a.zz ok profile=rxe", `7:14: unknown memory region a.zz (declare it with mr a.zz size=N)`},
	} {
		_, err := scenario.Parse("bad.scenario", prelude+c.text+"\n")
		if !assert.Error(t, err, c.text) {
			continue
		}
		assert.Equal(t, c.want, err.Error(), c.text)
		var pe *scenario.ParseError
		assert.True(t, errors.As(err, &pe), c.text)
	}
}

// TestProgramRereg: a rereg step becomes a StepRereg of the region's
// node with the flags its keys make.
func TestProgramRereg(t *testing.T) {
	s, err := scenario.Parse("t", `node a b
link a b
mr a.buf size=64
mr b.x size=64
mr b.y size=4096
qp a.q rc peer=b.q
qp b.q rc
at 0 b.y rereg access=local_write,remote_read
at 1us b.y rereg pd=other off=1024 len=1KiB
at 2us b.x rereg pd=own
`)
	require.NoError(t, err)
	p, err := s.Program()
	require.NoError(t, err)
	assert.Equal(t, []scenario.ProgramStep{
		{Line: 8, Node: 1, Kind: scenario.StepRereg, LocalMR: 1, RemoteMR: -1, MW: -1, Rereg: nic.ReregChangeAccess,
			Access: nic.AccessLocalWrite | nic.AccessRemoteRead},
		{At: 1000, Line: 9, Node: 1, Kind: scenario.StepRereg, LocalMR: 1, LocalOff: 1024, Len: 1024, RemoteMR: -1, MW: -1,
			Rereg: nic.ReregChangePD | nic.ReregChangeTranslation, OtherPD: true},
		{At: 2000, Line: 10, Node: 1, Kind: scenario.StepRereg, LocalMR: 0, RemoteMR: -1, MW: -1, Rereg: nic.ReregChangePD},
	}, p.Steps)
}

package conformance

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rocesim/rocesim/nic"
	"github.com/rocesim/rocesim/verbs"
)

// reregCalls are the ibv_rereg_mr calls TestReregMRMatchesRxe makes, on
// an MR of 8192 bytes registered LOCAL_WRITE|REMOTE_WRITE, in order.
var reregCalls = []struct {
	flags  nic.ReregFlags
	newPD  bool
	access nic.AccessFlags
	len    uint64 // CHANGE_TRANSLATION: the MR's own buffer, this long
}{
	{flags: nic.ReregChangeAccess, access: nic.AccessLocalWrite | nic.AccessRemoteWrite | nic.AccessRemoteRead},
	{flags: nic.ReregChangePD, newPD: true},
	{flags: nic.ReregChangePD | nic.ReregChangeAccess, access: nic.AccessLocalWrite},
	{flags: nic.ReregChangeTranslation, len: 4096},
	{flags: 0},
	{flags: 8},
	{flags: nic.ReregChangeTranslation, len: 0},
	{flags: nic.ReregChangeAccess, access: nic.AccessRemoteWrite},
	{flags: nic.ReregChangeAccess, access: nic.AccessLocalWrite | nic.AccessMWBind},
}

// reregResult is what one call returned: ibv_rereg_mr's value (0 or an
// IBV_REREG_MR_ERR_* code), errno, and the MR's keys after it.
type reregResult struct {
	ret, errno int
	lkey, rkey uint32
}

// TestReregMRMatchesRxe makes the same ibv_rereg_mr calls on real rxe
// (the agent's rereg command) and in the model (rxe profile) and compares
// what each returned. Real rxe 6.1 answers every call that reaches the
// kernel with IBV_REREG_MR_ERR_CMD and EOPNOTSUPP (the 6.1 driver has no
// rereg_user_mr), only libibverbs' own input checks answering first with
// IBV_REREG_MR_ERR_INPUT and EINVAL; the keys never change.
func TestReregMRMatchesRxe(t *testing.T) {
	needHarness(t)
	var script strings.Builder
	script.WriteString("open dev=rxe0\npd\nmr name=m0 len=8192 access=lw,rw\n")
	for _, c := range reregCalls {
		newPD := 0
		if c.newPD {
			newPD = 1
		}
		fmt.Fprintf(&script, "rereg mr=m0 flags=%d newpd=%d access=%s off=0 len=%d\n", c.flags, newPD, accessList(c.access), c.len)
	}
	ports, err := FreeUDPPorts(2)
	if err != nil {
		t.Fatal(err)
	}
	cfg := VMConfig{Name: "A", IP: "10.0.0.1", Peer: "10.0.0.2", LocalPort: ports[0], RemotePort: ports[1],
		Cmd: AgentScript(script.String()), LogPath: filepath.Join(t.TempDir(), "a.log"), Timeout: 3 * time.Minute}
	results, errs := runVMs(t, []VMConfig{cfg})
	evs, perr := ParseAgentOutput(results[0].Output)
	if errs[0] != nil || results[0].ExitCode != 0 || perr != nil {
		t.Fatalf("exit %d, err %v, parse %v; console:\n%s", results[0].ExitCode, errs[0], perr, results[0].Output)
	}
	var real []reregResult
	var key uint32
	for _, ev := range evs {
		switch ev.Event {
		case "mr":
			key = ev.LKey
		case "rereg":
			real = append(real, reregResult{ev.Ret, ev.Errno, ev.LKey - key, ev.RKey - key})
		}
	}
	model := modelRereg(t)
	if len(real) != len(reregCalls) {
		t.Fatalf("%d rereg results from rxe, want %d:\n%s", len(real), len(reregCalls), results[0].Output)
	}
	for i, c := range reregCalls {
		t.Logf("flags=%d access=%#x len=%d: rxe ret=%d errno=%d, model ret=%d errno=%d", c.flags, uint32(c.access), c.len,
			real[i].ret, real[i].errno, model[i].ret, model[i].errno)
		if real[i] != model[i] {
			t.Errorf("call %d (flags=%d): rxe %+v, model %+v (keys as differences from the MR's first)", i, c.flags, real[i], model[i])
		}
	}
}

// modelRereg makes reregCalls on the model, rxe profile.
func modelRereg(t *testing.T) []reregResult {
	w := verbs.NewWorld(verbs.WorldConfig{Seed: 1, Profile: nic.ProfileRXE})
	ctx, err := w.AddHost("a").GetDeviceList()[0].Open()
	if err != nil {
		t.Fatal(err)
	}
	pd, err := ctx.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	pd2, err := ctx.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 8192)
	mr, err := pd.RegMR(buf, nic.AccessLocalWrite|nic.AccessRemoteWrite)
	if err != nil {
		t.Fatal(err)
	}
	key := mr.LKey
	var out []reregResult
	for _, c := range reregCalls {
		npd := pd
		if c.newPD {
			npd = pd2
		}
		err := mr.Rereg(c.flags, npd, buf[:c.len], c.access)
		r := reregResult{lkey: mr.LKey - key, rkey: mr.RKey - key}
		var ne *nic.Error
		switch {
		case err == nil:
		case errors.As(err, &ne) && strings.Contains(ne.Msg, "IBV_REREG_MR_ERR_INPUT"):
			r.ret, r.errno = -1, int(ne.Errno)
		case errors.As(err, &ne) && strings.Contains(ne.Msg, "IBV_REREG_MR_ERR_CMD"):
			r.ret, r.errno = -4, int(ne.Errno)
		default:
			t.Fatalf("rereg flags=%d: unexpected error %v", c.flags, err)
		}
		out = append(out, r)
	}
	return out
}

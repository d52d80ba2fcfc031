package conformance

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"

	"github.com/rocesim/rocesim/verbs"
	"github.com/rocesim/rocesim/verbs/verbstest"
)

// The verbstest flags (-rocesim.seed, -rocesim.keep) for this test binary.
func init() { verbstest.RegisterFlags() }

// TestPostChecksMatchRxe posts work requests and creates CQs that the
// provider and kernel check before anything reaches the wire, on real
// rxe (one guest, its QP connected to a QP number of its own address
// that does not exist) and on
// the model, and requires the same answer from both: accepted, or the
// same errno. These are the checks of rdma-core's rxe post_send
// (validate_send_wr) and of ib_uverbs_create_cq that the model follows.
func TestPostChecksMatchRxe(t *testing.T) {
	vm, a, ctx := soloAgent(t, "checks")
	evs, err := a.Script(ctx, "open", "pd", "cq depth=16", "mr len=4096 fill=seq", "qp send=16 recv=16 sge=1 inline=16 psn=0",
		"connect gid=1 qpn=0x99 psn=0 dgid=10.0.0.1")
	if err != nil {
		t.Fatalf("%v\n%s", err, vm.Console())
	}
	vectors := evs[0].CompVectors
	if evs[0].Event != "open" || vectors < 1 {
		t.Fatalf("open: %+v, want the number of completion vectors", evs[0])
	}

	w := verbstest.New(t, verbstest.Options{})
	ma, mb := w.Pair("a", "b", verbstest.QPOptions{MaxInline: 16})
	src, dst := ma.Host.Buffer(4096), mb.Host.Buffer(4096)
	post := func(op verbs.WROpcode, raddr uint64, n uint64, flags verbs.SendFlags) error {
		_, err := ma.QP.PostSend([]verbs.SendWR{{WRID: 1, Opcode: op, Flags: flags, SGList: []verbs.SGE{src.SGE(0, n)},
			RemoteAddr: dst.Addr + raddr, RKey: dst.RKey}})
		return err
	}
	for _, c := range []struct {
		name  string
		agent string // the agent's command
		model func() error
		want  string // "ok" or the errno both must give
	}{
		{"atomic into 4 bytes", "post_send wr_id=1 op=faa add=1 len=4 raddr=0x1000 rkey=0x1234", func() error {
			return post(verbs.WRAtomicFetchAndAdd, 0, 4, 0)
		}, "EINVAL"},
		{"atomic into 16 bytes", "post_send wr_id=2 op=faa add=1 len=16 raddr=0x1000 rkey=0x1234", func() error {
			return post(verbs.WRAtomicFetchAndAdd, 0, 16, 0)
		}, "ok"},
		{"atomic at an unaligned address", "post_send wr_id=3 op=cas compare=0 swap=1 len=8 raddr=0x1004 rkey=0x1234", func() error {
			return post(verbs.WRAtomicCmpAndSwp, 4, 8, 0)
		}, "EINVAL"},
		// 80 bytes: over the inline data of both QPs, the agent's
		// (1 SGE, 16 bytes inline: a 16-byte WQE, rxe's max_inline_data
		// 16) and the model's (verbstest's 4 SGEs: 64).
		{"inline SEND over max_inline_data", "post_send wr_id=4 op=send len=80 inline=1", func() error {
			return post(verbs.WRSend, 0, 80, verbs.SendInline)
		}, "EINVAL"},
		{"inline flag on a READ over max_inline_data", "post_send wr_id=5 op=read len=80 inline=1 raddr=0x1000 rkey=0x1234", func() error {
			return post(verbs.WRRDMARead, 0, 80, verbs.SendInline)
		}, "EINVAL"},
		{"inline flag on a READ within max_inline_data", "post_send wr_id=6 op=read len=8 inline=1 raddr=0x1000 rkey=0x1234", func() error {
			return post(verbs.WRRDMARead, 0, 8, verbs.SendInline)
		}, "ok"},
		{"CQ on the last completion vector", fmt.Sprintf("cq name=last depth=4 vector=%d", vectors-1), func() error {
			_, err := ma.Host.Ctx.CreateCQ(4, nil, ma.Host.Ctx.NumCompVectors()-1)
			return err
		}, "ok"},
		{"CQ past the completion vectors", fmt.Sprintf("cq name=past depth=4 vector=%d", vectors), func() error {
			_, err := ma.Host.Ctx.CreateCQ(4, nil, ma.Host.Ctx.NumCompVectors())
			return err
		}, "EINVAL"},
	} {
		_, aerr := a.Do(ctx, c.agent)
		real, model := agentOutcome(aerr), verbOutcome(c.model())
		if real != c.want || model != c.want {
			t.Errorf("%s: rxe %s, model %s, want %s", c.name, real, model, c.want)
		}
	}
	// The device's answers that rdma-core's own tests (tests/ over
	// pyverbs) ask for, from rxe and from the drop-in library.
	rxeAns := deviceProbes(t, ctx, a)
	c := needCABI(t)
	la, err := startLocalAgent(ctx, "probes", c.Agent, []string{"LD_LIBRARY_PATH=" + c.Lib})
	if err != nil {
		t.Fatal(err)
	}
	defer la.Stop()
	la2, err := startAgent(ctx, la)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := la2.Script(ctx, "open dev=rocesim0", "pd", "cq depth=16"); err != nil {
		t.Fatalf("%v\n%s", err, la.Stderr())
	}
	dropinAns := deviceProbes(t, ctx, la2)
	if strings.Join(rxeAns, "\n") != strings.Join(dropinAns, "\n") {
		t.Errorf("the device's answers differ:\nrxe:\n  %s\ndrop-in:\n  %s", strings.Join(rxeAns, "\n  "), strings.Join(dropinAns, "\n  "))
	}
	t.Logf("rxe's answers:\n  %s", strings.Join(rxeAns, "\n  "))
	if t.Failed() {
		t.Logf("console:\n%s", vm.Console())
	}
}

// deviceProbes asks the agent a (its device open, with a pd and a cq
// named cq) what rdma-core's tests ask of a device: a RAW_PACKET QP
// (rxe_qp_chk_init: EOPNOTSUPP, which the tests take as "skip"), the GID
// table with no room, too little and enough (the kernel refuses the
// first two), phys_port_cnt_ex beside phys_port_cnt, a cmd_fd that can
// be dup'ed, and posts to a QP in RESET (the errno, and *bad_wr).
func deviceProbes(t *testing.T, ctx context.Context, a *Agent) []string {
	t.Helper()
	var out []string
	for _, cmd := range []string{"raw_qp cq=cq", "gid_table max=0", "gid_table max=1", "gid_table max=1024", "device_ex", "cmd_fd", "reset_post cq=cq"} {
		evs, err := a.Do(ctx, cmd)
		got := agentOutcome(err)
		if err == nil && len(evs) > 0 {
			switch ev := evs[len(evs)-1]; ev.Event {
			case "gid_table":
				got = fmt.Sprintf("n=%d", ev.N)
			case "device_ex":
				got = fmt.Sprintf("phys_port_cnt=%d phys_port_cnt_ex=%d", ev.Ports, ev.PortsEx)
			case "reset_post":
				got = ev.Detail
			}
		}
		out = append(out, cmd+": "+got)
	}
	return out
}

// agentOutcome is "ok", an errno name, or the agent's error text.
func agentOutcome(err error) string {
	if err == nil {
		return "ok"
	}
	if errors.Is(err, ErrAgent) {
		msg := strings.ToLower(err.Error())
		for _, e := range []struct {
			name  string
			errno syscall.Errno
		}{{"EINVAL", syscall.EINVAL}, {"EOPNOTSUPP", syscall.EOPNOTSUPP}} {
			if strings.HasSuffix(msg, e.errno.Error()) {
				return e.name
			}
		}
	}
	return err.Error()
}

// verbOutcome is "ok", an errno name, or the error text.
func verbOutcome(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, syscall.EINVAL):
		return "EINVAL"
	}
	return err.Error()
}

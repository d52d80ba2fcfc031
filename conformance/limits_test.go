package conformance

import (
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/rocesim/rocesim/nic"
	"github.com/rocesim/rocesim/wire"
)

// TestDeviceAttrMatchesRxe compares the model's device with a fresh rxe0
// in a guest:
//
//   - every limit `ibv_devinfo -v` prints equals the model's QueryDevice;
//   - what `rdma resource show` lists before any user opens the device
//     (ib_mad's PD, CQ and GSI QP) equals the model's Resources, and the
//     kernel PD's local_dma_lkey shows the DMA MR that counts against
//     max_mr too (the model counts it);
//   - the AH pool, the one small enough to fill in a guest (testdata/
//     ah-limit.c): rxe makes max_ah AHs, refuses the next with EINVAL (the
//     errno of __rxe_add_to_pool, shared by the PD, CQ, QP and SRQ
//     pools) and takes one again once one is destroyed; so does the model;
//   - the limits the kernel checks at creation, probed with the agent one
//     past and at the limit: max_sge, max_inline_data (not in
//     ibv_device_attr), max_qp_wr, max_cqe; the same answer from the model;
//   - QPNs are handed out cyclically: the agent's QP is destroyed when it
//     exits, and the next agent's QP gets the next number, not the freed
//     one; the model gives the same two numbers.
//
// The other limits on how many objects may live at once (max_pd, max_qp,
// ...) are too large to exhaust in a guest; nic's
// TestLimitsEnforcedAsReported holds the model to them, and rxe_pool.c's
// num_elem/max_elem is what it follows.
func TestDeviceAttrMatchesRxe(t *testing.T) {
	needHarness(t)
	probe := buildProbe(t, "testdata/ah-limit.c")
	vm, a, ctx := soloAgentAfter(t, "limits",
		"ibv_devinfo -v -d rxe0; echo RES:$(rdma resource show rxe0); echo PD:$(rdma resource show pd); /usr/bin/ah-limit $rxe_ip $RXE_GID; ",
		map[string][]byte{"usr/bin/ah-limit": probe})
	console := vm.Console()
	defer func() {
		if t.Failed() {
			t.Logf("console:\n%s", vm.Console())
		}
	}()

	dev := nic.New(nic.Config{MAC: wire.MAC{2, 0, 0, 0, 0, 1}, IPv4: netip.MustParseAddr("10.0.0.1")})
	attr := dev.QueryDevice()
	devinfo := map[string]string{}
	for _, m := range regexp.MustCompile(`(?m)^\s*(\w+):\s+(\S+)`).FindAllStringSubmatch(console, -1) {
		if _, seen := devinfo[m[1]]; !seen {
			devinfo[m[1]] = m[2]
		}
	}
	for _, c := range []struct {
		name  string
		model uint64
	}{
		{"max_mr_size", attr.MaxMRSize}, {"max_qp", uint64(attr.MaxQP)}, {"max_qp_wr", uint64(attr.MaxQPWR)},
		{"max_sge", uint64(attr.MaxSGE)}, {"max_cq", uint64(attr.MaxCQ)}, {"max_cqe", uint64(attr.MaxCQE)},
		{"max_mr", uint64(attr.MaxMR)}, {"max_pd", uint64(attr.MaxPD)}, {"max_qp_rd_atom", uint64(attr.MaxQPRdAtom)},
		{"max_qp_init_rd_atom", uint64(attr.MaxQPInitRdAtom)}, {"max_mw", uint64(attr.MaxMW)},
		{"max_ah", uint64(attr.MaxAH)}, {"max_srq", uint64(attr.MaxSRQ)}, {"max_srq_wr", uint64(attr.MaxSRQWR)},
		{"max_srq_sge", uint64(attr.MaxSRQSGE)}, {"phys_port_cnt", uint64(attr.PhysPortCnt)},
	} {
		v, err := strconv.ParseUint(devinfo[c.name], 0, 64)
		if err != nil || v != c.model {
			t.Errorf("%s: rxe %q, model %d", c.name, devinfo[c.name], c.model)
		}
	}
	if devinfo["fw_ver"] != attr.FWVer || devinfo["atomic_cap"] != attr.AtomicCap {
		t.Errorf("fw_ver, atomic_cap: rxe %q %q, model %q %q", devinfo["fw_ver"], devinfo["atomic_cap"], attr.FWVer, attr.AtomicCap)
	}

	// "RES:0: rxe0: pd 1 cq 1 qp 1 cm_id 0 mr 0 ctx 0 srq 0"
	res := regexp.MustCompile(`RES:.*rxe0: (.*)`).FindStringSubmatch(console)
	if res == nil {
		t.Fatalf("no rdma resource show line")
	}
	counts := map[string]int{}
	f := strings.Fields(res[1])
	for i := 0; i+1 < len(f); i += 2 {
		counts[f[i]], _ = strconv.Atoi(f[i+1])
	}
	r := dev.Resources()
	if got, want := fmt.Sprint(counts["pd"], counts["cq"], counts["qp"], counts["srq"], counts["mr"]),
		fmt.Sprint(r.PD, r.CQ, r.QP, r.SRQ, r.MR); got != want {
		t.Errorf("held before any user (pd cq qp srq mr): rxe %s, model %s", got, want)
	}
	if m := regexp.MustCompile(`PD:.*local_dma_lkey (0x[0-9a-f]+)`).FindStringSubmatch(console); m == nil {
		t.Errorf("no local_dma_lkey on the kernel's PD: is there no DMA MR?")
	} else if k, _ := strconv.ParseUint(m[1], 0, 32); k>>8 != 1 {
		t.Errorf("the kernel PD's DMA MR has lkey %s, want MR index 1 (the first MR)", m[1])
	}

	// The AH pool, the one small enough to fill in a guest: its count
	// stops at max_ah (the kernel holds no AH), with the errno of rxe's
	// __rxe_add_to_pool, which every pool but the MRs' shares (PD, CQ,
	// QP, SRQ); a destroyed AH frees its place.
	m := regexp.MustCompile(`AH-LIMIT created=(\d+) errno=(\w+)`).FindStringSubmatch(console)
	if m == nil {
		t.Fatalf("ah-limit printed no result")
	}
	again := strings.Contains(console, "AH-LIMIT again=1")
	ahAttr := nic.AHAttr{IsGlobal: true, PortNum: 1, GRH: nic.GRH{DGID: netip.MustParseAddr("::ffff:10.0.0.1"), HopLimit: 64}} // the model's only GID
	mpd0, err := dev.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	var ahs []*nic.AH
	var ahErr error
	for len(ahs) < 40000 {
		ah, err := dev.CreateAH(mpd0, ahAttr)
		if err != nil {
			ahErr = err
			break
		}
		ahs = append(ahs, ah)
	}
	modelAgain := len(ahs) > 0 && dev.DestroyAH(ahs[0]) == nil
	if _, err := dev.CreateAH(mpd0, ahAttr); err != nil {
		modelAgain = false
	}
	if got, want := fmt.Sprint(m[1], " ", m[2], " ", again), fmt.Sprint(len(ahs), " ", verbOutcome(ahErr), " ", modelAgain); got != want {
		t.Errorf("AHs made before a refusal, its errno, one more after a destroy: rxe %s, model %s", got, want)
	}
	t.Logf("AHs: rxe made %s, then %s", m[1], m[2])

	// The same creations on rxe and on the model. mpd and mcq are the
	// model's; each row's model call creates and keeps its QP or CQ.
	mpd, err := dev.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	mcq, err := dev.CreateCQ(16, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var mqp *nic.QP
	modelQP := func(send, sge, inline int) error {
		q, err := dev.CreateQP(mpd, nic.QPInitAttr{SendCQ: mcq, RecvCQ: mcq, Type: nic.QPTypeRC,
			Cap: nic.QPCap{MaxSendWR: uint32(send), MaxRecvWR: 16, MaxSendSGE: uint32(sge), MaxRecvSGE: uint32(sge), MaxInlineData: uint32(inline)}})
		if err == nil {
			mqp = q
		}
		return err
	}
	agentQP := func(send, sge, inline int) string {
		return fmt.Sprintf("qp send=%d recv=16 sge=%d inline=%d psn=0", send, sge, inline)
	}
	evs, err := a.Script(ctx, "open", "pd", "cq depth=16", "mr len=4096")
	if err != nil {
		t.Fatal(err)
	}
	// Not compared (keys are normalised in the differential runs): the
	// kernel's DMA MR took MR index 1, so rxe gives the user's first MR
	// index 2 where the model gives 1.
	if ev := lastEvent(evs, "mr"); ev != nil {
		t.Logf("the agent's first MR: lkey %#x (index %d)", ev.LKey, ev.LKey>>8)
	}
	for _, c := range []struct {
		name          string
		agent         string
		model         func() error
		want          string
		send, sge, in int
	}{
		{name: "max_sge + 1", send: 16, sge: attr.MaxSGE + 1, want: "EINVAL"},
		{name: "max_inline_data + 1", send: 16, sge: 1, in: attr.MaxInlineData + 1, want: "EINVAL"},
		{name: "max_qp_wr + 1", send: attr.MaxQPWR + 1, sge: 1, want: "EINVAL"},
		{name: "max_sge and max_inline_data", send: 16, sge: attr.MaxSGE, in: attr.MaxInlineData, want: "ok"},
		{name: "max_cqe", agent: fmt.Sprintf("cq name=big depth=%d", attr.MaxCQE), want: "ok",
			model: func() error { _, err := dev.CreateCQ(attr.MaxCQE, nil, 0); return err }},
		{name: "max_cqe + 1", agent: fmt.Sprintf("cq name=over depth=%d", attr.MaxCQE+1), want: "EINVAL",
			model: func() error { _, err := dev.CreateCQ(attr.MaxCQE+1, nil, 0); return err }},
	} {
		if c.agent == "" {
			c.agent = agentQP(c.send, c.sge, c.in)
			c.model = func() error { return modelQP(c.send, c.sge, c.in) }
		}
		_, aerr := a.Do(ctx, c.agent)
		if real, model := agentOutcome(aerr), verbOutcome(c.model()); real != c.want || model != c.want {
			t.Errorf("%s: rxe %s, model %s, want %s", c.name, real, model, c.want)
		}
	}

	// QPNs: the agent's QP, then (after the agent exits and its QP is
	// destroyed) the next agent's; the model destroys its QP and makes
	// another.
	var rxeQPN [2]uint32
	for i := range rxeQPN {
		if i == 1 {
			if err := a.Restart(ctx); err != nil {
				t.Fatal(err)
			}
			if _, err := a.Script(ctx, "open", "pd", "cq depth=16", agentQP(16, 1, 0)); err != nil {
				t.Fatal(err)
			}
		}
		evs, err := a.Do(ctx, "info gid=1")
		if ev := lastEvent(evs, "info"); err != nil || ev == nil {
			t.Fatalf("info: %v %+v", err, evs)
		} else {
			rxeQPN[i] = ev.QPN
		}
	}
	var modelQPN [2]uint32
	if mqp == nil {
		t.Fatal("the model made no QP")
	}
	modelQPN[0] = mqp.Num()
	if err := dev.DestroyQP(mqp); err != nil {
		t.Fatal(err)
	}
	if err := modelQP(16, 1, 0); err != nil {
		t.Fatal(err)
	}
	modelQPN[1] = mqp.Num()
	if rxeQPN != modelQPN {
		t.Errorf("QPNs of a QP and of the next after it was destroyed: rxe %#x, model %#x", rxeQPN, modelQPN)
	}
	t.Logf("QPNs: rxe %#x, model %#x; rdma resource show before any user: %s", rxeQPN, modelQPN, res[1])
}

// buildProbe compiles a C probe of testdata with the host's cc against
// libibverbs, as the agent is built, and returns the binary.
func buildProbe(t *testing.T, src string) []byte {
	_, data := buildProgram(t, src, "-libverbs")
	return data
}

// buildProgram compiles the C program src with the host's cc and libs
// (rdma-core's: the guest's, or the drop-in's through LD_LIBRARY_PATH)
// and returns the binary's path and bytes (for a guest's Files).
func buildProgram(t *testing.T, src string, libs ...string) (string, []byte) {
	t.Helper()
	bin := filepath.Join(t.TempDir(), strings.TrimSuffix(filepath.Base(src), ".c"))
	if out, err := exec.Command("cc", append([]string{"-O2", "-Wall", "-o", bin, src}, libs...)...).CombinedOutput(); err != nil {
		t.Fatalf("building %s: %v\n%s", src, err, out)
	}
	data, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	return bin, data
}

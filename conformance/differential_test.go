package conformance

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rocesim/rocesim/scenario"
	"github.com/rocesim/rocesim/wire"
	"github.com/rocesim/rocesim/wire/capture"
)

// warmup is run first on a new rig: one SEND each way, so both guests
// have resolved each other's MAC before a scenario's plan starts.
const warmup = `scenario warmup
node a b
link a b
mr a.buf size=64
mr b.buf size=64
qp a.q rc peer=b.q psn=1
qp b.q rc psn=1
at 0 a.q recv wr=1 len=64
at 0 b.q recv wr=2 len=64
at 0 a.q send wr=3 op=send len=64
at 0 b.q send wr=4 op=send len=64
`

// TestDifferential runs each conformance scenario on two real rxe guests
// through the fault switch and in the simulation (rxe profile), and
// compares the normalised outcomes: completions, memory and the wire
// sequence of each direction. A difference must be a known deviation
// (knownDeviations, with its cause). The third leg runs the same
// scenario as the agent on the drop-in library (CABI, the model through
// the C ABI) and compares it with the same rxe run, the same way. The
// table is written to $ROCESIM_RESULTS when set (make conformance:
// conformance/RESULTS.md), the C ABI verdict in a column of its own.
func TestDifferential(t *testing.T) {
	needHarness(t)
	cabi := needCABI(t)
	logs := logDir(t)
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Minute)
	defer cancel()
	pv := provenance(t) // before the run, so that a commit made meanwhile is not named
	t0 := time.Now()
	rig, err := StartRig(ctx, logs)
	if err != nil {
		t.Fatal(err)
	}
	defer rig.Close()
	w, err := scenario.Parse("warmup", warmup)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rig.Run(ctx, w, ""); err != nil {
		t.Fatalf("warm-up: %v\nconsole a:\n%s\nconsole b:\n%s", err, rig.VMs[0].Console(), rig.VMs[1].Console())
	}
	t.Logf("rig up in %v", time.Since(t0).Round(time.Millisecond))

	scens, err := Scenarios()
	if err != nil {
		t.Fatal(err)
	}
	var rows []ResultRow
	for _, s := range scens {
		if only := os.Getenv("ROCESIM_SCENARIOS"); only != "" && !containsString(strings.Split(only, ","), s.Name) {
			continue // for debugging: ROCESIM_SCENARIOS=a,b runs only those
		}
		t1 := time.Now()
		model, _, err := ModelOutcome(s, filepath.Join(logs, s.Name+".model.pcapng"))
		if err != nil {
			t.Fatalf("%s: simulation: %v", s.Name, err)
		}
		real, diffs, err := runReal(ctx, t, rig, s, model, logs)
		if err != nil {
			t.Fatalf("%s: real rxe: %v", s.Name, err)
		}
		viaC, err := cabi.Run(ctx, s, filepath.Join(logs, s.Name+".cabi.pcapng"))
		if err != nil {
			t.Fatalf("%s: C ABI: %v", s.Name, err)
		}
		if dir := os.Getenv("ROCESIM_WIRE_GOLDENS"); dir != "" {
			// Real rxe frames as test vectors for wire/ (then make golden).
			if err := saveRoCEPcap(filepath.Join(logs, s.Name+".rxe.pcapng"), filepath.Join(dir, "rxe_"+strings.ReplaceAll(s.Name, "-", "_")+".pcap")); err != nil {
				t.Fatal(err)
			}
		}
		// The scenario's claims on completions hold on rxe and through the
		// C ABI as they do in the simulation (ModelOutcome checked them
		// there): flags= above all, which Compare sees only as a difference.
		viaDiffs := Compare(viaC, real)
		diffs = append(diffs, claimDiffs(t, s, real, "rxe")...)
		viaDiffs = append(viaDiffs, claimDiffs(t, s, viaC, "C ABI")...)
		row := classify(s.Name, diffs)
		viaRow := classify(s.Name, viaDiffs)
		row.CABIVerdict, row.CABIDiffs = viaRow.Verdict, viaRow.Diffs
		rows = append(rows, row)
		t.Logf("%s: %s (%d differences), C ABI %s (%d) in %v", s.Name, row.Verdict, len(row.Diffs), row.CABIVerdict, len(row.CABIDiffs),
			time.Since(t1).Round(time.Millisecond))
		if row.Verdict == VerdictMismatch {
			t.Errorf("%s: rxe and the model differ beyond the known deviations:", s.Name)
			for _, d := range row.Diffs {
				t.Errorf("  %v", d)
			}
		}
		if row.CABIVerdict == VerdictMismatch {
			t.Errorf("%s: rxe and the model through the C ABI differ beyond the known deviations:", s.Name)
			for _, d := range row.CABIDiffs {
				t.Errorf("  %v", d)
			}
		}
	}
	doc := RenderResults(pv, rows)
	t.Logf("\n%s", doc)
	if p := os.Getenv("ROCESIM_RESULTS"); p != "" {
		if err := os.WriteFile(p, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if t.Failed() {
		t.Logf("captures and consoles in %s (kept when ROCESIM_CONFORMANCE_LOGS names a directory)", logs)
	}
}

// claimDiffs checks s's claims on completions against o, the outcome of
// the leg named leg, and returns each claim not met as a Diff "claim".
func claimDiffs(t *testing.T, s *scenario.Scenario, o *Outcome, leg string) []Diff {
	p, err := s.Program()
	if err != nil {
		t.Fatal(err)
	}
	n, failed := CheckClaims(s, p, o)
	t.Logf("%s: %s: %d claims on completions checked, %d not met", s.Name, leg, n, len(failed))
	var out []Diff
	for _, f := range failed {
		out = append(out, Diff{What: "claim", Detail: f})
	}
	return out
}

// maxRealAttempts bounds how often one scenario is run on the guests
// when runs are void (voidRun).
const maxRealAttempts = 5

// runReal runs s on the rig and compares it with the model's outcome. A
// run that differed while the QEMUs or the switch were kept off the CPU
// for the scenario's StallLimit or longer is void (a busy host, not rxe:
// see cpuwait.go) and is run again, up to maxRealAttempts times; its
// capture is kept as <name>.rxe.void<N>.pcapng. The last run's outcome
// and differences are returned, compared in full as any other.
func runReal(ctx context.Context, t *testing.T, rig *Rig, s *scenario.Scenario, model *Outcome, logs string) (*Outcome, []Diff, error) {
	prog, err := s.Program()
	if err != nil {
		return nil, nil, err
	}
	limit := StallLimit(prog)
	capPath := filepath.Join(logs, s.Name+".rxe.pcapng")
	for attempt := 1; ; attempt++ {
		real, err := rig.Run(ctx, s, capPath)
		if err != nil {
			return nil, nil, err
		}
		diffs := Compare(model, real)
		w := rig.LastWait()
		void := voidRun(diffs, w, limit)
		if !void || attempt == maxRealAttempts {
			if void {
				t.Logf("%s: still differs after %d runs, each with a wait for a CPU of %v or more (last: %v): the host is too busy to witness rxe",
					s.Name, attempt, limit, w)
			} else {
				t.Logf("%s: run %d judged (%v; limit %v)", s.Name, attempt, w, limit)
			}
			return real, diffs, nil
		}
		t.Logf("%s: run %d void: %d differences (first: %v) while %v (StallLimit %v); running it again",
			s.Name, attempt, len(diffs), diffs[0], w, limit)
		if err := os.Rename(capPath, filepath.Join(logs, s.Name+".rxe.void"+strconv.Itoa(attempt)+".pcapng")); err != nil {
			return nil, nil, err
		}
	}
}

// logDir is where a test writes consoles and captures: a fresh directory
// under $ROCESIM_CONFORMANCE_LOGS, kept, or a temporary one.
func logDir(t *testing.T) string {
	base := os.Getenv("ROCESIM_CONFORMANCE_LOGS")
	if base == "" {
		return t.TempDir()
	}
	dir := filepath.Join(base, t.Name())
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// knownDeviation is a difference between rxe and the model that is
// understood: Diffs whose What starts with what and whose Detail
// contains detail are explained by cause.
type knownDeviation struct {
	what, detail, cause string
}

// knownDeviations lists, per scenario, the understood differences. Each
// is also written up in conformance/README.md.
var knownDeviations = map[string][]knownDeviation{}

// classify gives a scenario's row: match, known deviation (every
// difference explained) or mismatch.
func classify(name string, diffs []Diff) ResultRow {
	row := ResultRow{Scenario: name, Verdict: VerdictMatch, Diffs: diffs}
	if len(diffs) == 0 {
		return row
	}
	row.Verdict = VerdictKnownDeviation
	var causes []string
	for _, d := range diffs {
		explained := false
		for _, k := range knownDeviations[name] {
			if strings.HasPrefix(d.What, k.what) && strings.Contains(d.Detail, k.detail) {
				explained = true
				if !containsString(causes, k.cause) {
					causes = append(causes, k.cause)
				}
				break
			}
		}
		if !explained {
			row.Verdict = VerdictMismatch
		}
	}
	row.Cause = strings.Join(causes, " ")
	return row
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// saveRoCEPcap copies the RoCE v2 frames of a capture into a classic pcap
// file (the form wire/testdata holds), comments and other frames left out.
func saveRoCEPcap(from, to string) error {
	r, err := capture.Open(from)
	if err != nil {
		return err
	}
	defer r.Close()
	f, err := os.Create(to)
	if err != nil {
		return err
	}
	w, err := capture.NewPcapWriter(f)
	if err != nil {
		f.Close()
		return err
	}
	var pkt wire.Packet
	for rec, err := range r.Records() {
		if err != nil {
			f.Close()
			return fmt.Errorf("%s: %w", from, err)
		}
		if pkt.DecodeHeaders(rec.Data) != nil {
			continue
		}
		if err := w.WriteFrame(rec.Time, 0, rec.Data, ""); err != nil {
			f.Close()
			return err
		}
	}
	if err := w.Close(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// provenance names the commit, kernel and day this run is produced from,
// for RESULTS.md. The commit is marked dirty when the tree has changes, so
// a table regenerated from uncommitted code says so.
func provenance(t *testing.T) Provenance {
	pv := Provenance{Commit: "unknown", Kernel: "unknown", Date: time.Now().UTC().Format(time.DateOnly)}
	if out, err := exec.Command("git", "rev-parse", "--short=12", "HEAD").Output(); err == nil {
		pv.Commit = strings.TrimSpace(string(out))
		if st, err := exec.Command("git", "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(bytes.TrimSpace(st)) > 0 {
			pv.Commit += "-dirty"
		}
	} else {
		t.Logf("provenance: git: %v", err)
	}
	if im, err := Prepare(); err == nil {
		pv.Kernel = im.KernelVersion
	} else {
		t.Logf("provenance: %v", err)
	}
	return pv
}

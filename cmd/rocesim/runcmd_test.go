package main

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocesim/rocesim/scenario"
)

var wallTime = regexp.MustCompile(`wall time [0-9.]+[a-zµ]+`)

// runGolden compares got with testdata/run/name, or rewrites it with -update.
func runGolden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", "run", name)
	if *update {
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, []byte(got), 0o644))
		return
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "missing golden file (go test ./cmd/rocesim -run TestRunBuiltins -update)")
	assert.Equal(t, string(want), got, "%s differs from its golden file; review and rerun with -update", path)
}

// TestRunBuiltins runs every built-in scenario: it meets its own
// expectations (exit 0), its terminal ladder and JSON result match their
// golden files, and its JSON completions hold what the scenario claims.
func TestRunBuiltins(t *testing.T) {
	all := scenario.Builtin()
	require.GreaterOrEqual(t, len(all), 14)
	for _, s := range all {
		t.Run(s.Name, func(t *testing.T) {
			code, out, errOut := runCmd("run", s.Name)
			require.Equal(t, exitOK, code, "stderr: %s", errOut)
			runGolden(t, s.Name+".txt", wallTime.ReplaceAllString(out, "wall time X"))

			code, out, errOut = runCmd("run", s.Name, "--json")
			require.Equal(t, exitOK, code, "stderr: %s", errOut)
			runGolden(t, s.Name+".json", out)
			var res struct {
				Scenario    string `json:"scenario"`
				Completions []struct {
					Status string `json:"status"`
				} `json:"completions"`
				Frames        int   `json:"frames"`
				VirtualTimeNS int64 `json:"virtual_time_ns"`
			}
			require.NoError(t, json.Unmarshal([]byte(out), &res))
			assert.Equal(t, s.Name, res.Scenario)
			assert.NotEmpty(t, res.Completions)
			assert.Positive(t, res.Frames)
		})
	}
}

// TestRetryExceededClaims: exactly one RETRY_EXC_ERR, then WR_FLUSH_ERR
// for the rest of that send queue.
func TestRetryExceededClaims(t *testing.T) {
	code, out, _ := runCmd("run", "retry-exceeded", "--json")
	require.Equal(t, exitOK, code)
	var res struct {
		Completions []struct {
			Node   string `json:"node"`
			Status string `json:"status"`
		} `json:"completions"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &res))
	var a []string
	for _, c := range res.Completions {
		if c.Node == "a" {
			a = append(a, c.Status)
		}
	}
	i := 0
	for i < len(a) && a[i] == "IBV_WC_SUCCESS" {
		i++
	}
	require.Less(t, i, len(a))
	assert.Equal(t, "IBV_WC_RETRY_EXC_ERR", a[i])
	for _, s := range a[i+1:] {
		assert.Equal(t, "IBV_WC_WR_FLUSH_ERR", s)
	}
	assert.Greater(t, len(a), i+1, "later WRs flushed")
}

// TestRunCaptures: for every built-in, two runs with the same seed give
// byte-identical pcapng files; tshark dissects every frame with nothing
// malformed and shows the frame comments; inspect exits 0.
func TestRunCaptures(t *testing.T) {
	needTshark(t)
	dir := t.TempDir()
	for _, s := range scenario.Builtin() {
		a, b := filepath.Join(dir, s.Name+".1.pcapng"), filepath.Join(dir, s.Name+".2.pcapng")
		for _, p := range []string{a, b} {
			code, _, errOut := runCmd("run", s.Name, "--seed", "7", "--pcap", p, "--quiet")
			require.Equal(t, exitOK, code, "%s: %s", s.Name, errOut)
		}
		x, err := os.ReadFile(a)
		require.NoError(t, err)
		y, err := os.ReadFile(b)
		require.NoError(t, err)
		require.True(t, bytes.Equal(x, y), "%s: two runs with one seed differ", s.Name)

		// As a user opens it: Wireshark's heuristic payload dissectors
		// (RPC-over-RDMA, SMB Direct, iSER, EoIB...) stay on, as they are
		// in a stock install. Nothing may be malformed, and no frame may be
		// claimed by an upper-layer protocol: every one is RoCE v2.
		bad := tshark(t, "-r", a, "-Y", "_ws.malformed || !infiniband", "-T", "fields", "-e", "frame.number", "-e", "_ws.col.Info")
		assert.Empty(t, strings.TrimSpace(bad), "%s: malformed frames, or frames a heuristic claimed", s.Name)
		protos := tshark(t, "-r", a, "-T", "fields", "-e", "frame.protocols")
		for _, p := range strings.Split(strings.TrimSpace(protos), "\n") {
			assert.True(t, strings.HasSuffix(p, ":infiniband") || strings.HasSuffix(p, ":infiniband:data"),
				"%s: a frame dissected as %s: a heuristic claimed its payload", s.Name, p)
		}
		comments := tshark(t, "-r", a, "-T", "fields", "-e", "frame.comment")
		assert.NotEmpty(t, strings.TrimSpace(comments), "%s: no frame comments", s.Name)
		code, _, errOut := runCmd("inspect", a)
		assert.Equal(t, exitOK, code, "%s: inspect: %s", s.Name, errOut)
	}
}

// TestRunSVG: the go-back-n SVG is well-formed XML and shows the drop,
// the NAK and the retransmissions.
func TestRunSVG(t *testing.T) {
	p := filepath.Join(t.TempDir(), "g.svg")
	code, _, errOut := runCmd("run", "go-back-n", "--svg", p, "--quiet")
	require.Equal(t, exitOK, code, errOut)
	data, err := os.ReadFile(p)
	require.NoError(t, err)
	dec := xml.NewDecoder(bytes.NewReader(data))
	for {
		_, err := dec.Token()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
	}
	for _, want := range []string{"rule 1", "NAK", "retx"} {
		assert.Contains(t, string(data), want)
	}
}

// TestRunFileEqualsBuiltin: examples/go-back-n.scenario gives the same
// result as the built-in.
func TestRunFileEqualsBuiltin(t *testing.T) {
	_, a, _ := runCmd("run", "go-back-n", "--json")
	_, b, _ := runCmd("run", "../../examples/go-back-n.scenario", "--json")
	assert.Equal(t, a, b)
}

func TestRunUsage(t *testing.T) {
	code, _, errOut := runCmd("run")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, errOut, "want exactly one scenario")
	code, _, errOut = runCmd("run", "no-such-scenario")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, errOut, "no built-in scenario")
	code, _, errOut = runCmd("run", "go-back-n", "--profile", "x")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, errOut, "want rxe or spec")
	code, out, _ := runCmd("scenarios")
	assert.Equal(t, exitOK, code)
	assert.Contains(t, out, "go-back-n")
	code, out, _ = runCmd("help", "run")
	assert.Equal(t, exitOK, code)
	assert.Contains(t, out, "Examples:")
}

// TestRunFailedExpectation: a scenario whose expectations do not hold
// exits 1 and says which.
func TestRunFailedExpectation(t *testing.T) {
	src, err := os.ReadFile("../../examples/go-back-n.scenario")
	require.NoError(t, err)
	bad := strings.Replace(string(src), "expect a.q wr=2 IBV_WC_SUCCESS", "expect a.q wr=2 IBV_WC_RETRY_EXC_ERR", 1)
	require.NotEqual(t, string(src), bad, "the example changed: update this test")
	p := filepath.Join(t.TempDir(), "bad.scenario")
	require.NoError(t, os.WriteFile(p, []byte(bad), 0o644))
	code, _, errOut := runCmd("run", p, "--quiet")
	assert.Equal(t, exitBad, code)
	assert.Contains(t, errOut, "expectation failed")
}

// TestRunSaysWhatWasNotClaimed: a scenario without expect lines is not
// "all met", and a fault rule that never acted is a warning in the
// summary; an empty file is refused.
func TestRunSaysWhatWasNotClaimed(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "noclaim.scenario")
	require.NoError(t, os.WriteFile(p, []byte("node a b\nlink a b\nmr a.buf size=64\nmr b.buf size=64\nqp a.q rc peer=b.q\nqp b.q rc\n"+
		"fault drop psn=77\nat 0 a.q send wr=1 op=write len=8\n"), 0o644))
	code, out, _ := runCmd("run", p, "--quiet")
	assert.Equal(t, 0, code)
	assert.Contains(t, out, "warning: line 7: fault rule 1 never matched a frame: drop psn=77\n")
	assert.Contains(t, out, "expectations: none (the scenario claims nothing: add expect lines)\n")
	assert.NotContains(t, out, "all met")

	empty := filepath.Join(dir, "empty.scenario")
	require.NoError(t, os.WriteFile(empty, []byte("# nothing yet\n"), 0o644))
	code, _, errOut := runCmd("run", empty, "--quiet")
	assert.NotEqual(t, 0, code)
	assert.Contains(t, errOut, "empty scenario")
}

package main

import (
	"encoding/json"
	"fmt"
	"github.com/rocesim/rocesim/scenario"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// cliTranscript runs the command line (with in as standard input) and
// returns what a reader of a terminal session would see: the command,
// its exit status, standard output and standard error, with the wall
// time and the temporary directory replaced by stand-ins.
func cliTranscript(t *testing.T, dir, in string, args ...string) string {
	t.Helper()
	old := stdin
	stdin = strings.NewReader(in)
	defer func() { stdin = old }()
	code, out, errOut := runCmd(args...)
	quoted := make([]string, len(args))
	for i, a := range args {
		quoted[i] = a
		if strings.ContainsAny(a, " ") {
			quoted[i] = "'" + a + "'"
		}
	}
	s := fmt.Sprintf("$ rocesim %s\n[exit %d]\n--- stdout\n%s--- stderr\n%s", strings.Join(quoted, " "), code, out, errOut)
	s = wallTime.ReplaceAllString(s, "wall time X")
	if dir != "" {
		s = strings.ReplaceAll(s, dir, "TMP")
	}
	return s
}

// TestCLIGolden pins the command line a teacher uses: the help texts,
// --set and --fault, --deadline, run - from standard input, the
// FILE:LINE:COL of a scenario error, the refusals, inspect -Y and -c,
// scenarios --json. Each case's transcript is testdata/cli/NAME.txt (go
// test -update rewrites them; review the diff).
func TestCLIGolden(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.scenario")
	require.NoError(t, os.WriteFile(bad, []byte("node a b\nlink a b\n\nqp a.q rc peer=b.q   retry_cnt=9\n"), 0o644))
	pcap := filepath.Join(dir, "g.pcapng")
	code, _, errOut := runCmd("run", "go-back-n", "--quiet", "--pcap", pcap)
	require.Equal(t, exitOK, code, errOut)
	gbn, err := os.ReadFile("../../examples/go-back-n.scenario")
	require.NoError(t, err)
	for _, c := range []struct {
		name, stdin string
		args        []string
	}{
		{"help", "", []string{"--help"}},
		{"help-run", "", []string{"run", "--help"}},
		{"help-inspect", "", []string{"help", "inspect"}},
		{"help-demo", "", []string{"demo", "--help"}},
		{"help-scenarios", "", []string{"scenarios", "-h"}},
		{"set-link-delay", "", []string{"run", "go-back-n", "--set", "link.delay=10us", "--quiet"}},
		{"set-retry-spec", "", []string{"run", "retry-exceeded", "--set", "a.q.retry_cnt=7", "--profile", "spec", "--quiet"}},
		{"set-retry-deadline", "", []string{"run", "retry-exceeded", "--set", "a.q.retry_cnt=7", "--deadline", "30ms", "--quiet"}},
		{"fault-added", "", []string{"run", "go-back-n", "--fault", "drop psn=4 tx=1", "--fault", "drop class=ack first=1"}},
		{"set-bad-value", "", []string{"run", "go-back-n", "--set", "a.q.retry_cnt=9"}},
		{"set-no-target", "", []string{"run", "go-back-n", "--set", "a.x.retry_cnt=2"}},
		{"set-malformed", "", []string{"run", "go-back-n", "--set", "retry_cnt"}},
		{"fault-bad", "", []string{"run", "go-back-n", "--fault", "drop psn=x"}},
		{"fault-unknown-node", "", []string{"run", "go-back-n", "--fault", "drop src=z"}},
		{"parse-error-position", "", []string{"run", bad}},
		{"stdin", string(gbn), []string{"run", "-", "--quiet"}},
		{"stdin-error", "node a b\nlink a c\n", []string{"run", "-"}},
		{"pcap-svg-same", "", []string{"run", "go-back-n", "--pcap", "x.out", "--svg", "./x.out"}},
		{"svg-over-scenario", "", []string{"run", bad, "--svg", bad}},
		{"unknown-flag", "", []string{"run", "go-back-n", "--bogus"}},
		{"bad-flag-value", "", []string{"run", "go-back-n", "--seed", "x"}},
		{"inspect-filter", "", []string{"inspect", "-Y", "class=nak", pcap}},
		{"inspect-filter-count", "", []string{"inspect", "-Y", "src=a tx=2", "-c", "2", pcap}},
		{"inspect-count", "", []string{"inspect", "-c", "1", pcap}},
		{"inspect-filter-json", "", []string{"inspect", "--json", "--filter", "op=RC_ACKNOWLEDGE psn=4", pcap}},
		{"inspect-filter-bad", "", []string{"inspect", "-Y", "drop psn=2", pcap}},
		{"inspect-filter-bad-value", "", []string{"inspect", "-Y", "qp=0x11 psn=x", pcap}},
		{"scenarios-json", "", []string{"scenarios", "--json"}},
		{"nodes", "", []string{"run", "alltoall", "--nodes", "a,c"}},
		{"nodes-unknown", "", []string{"run", "alltoall", "--nodes", "a,z"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			golden(t, filepath.Join("cli", c.name+".txt"), cliTranscript(t, dir, c.stdin, c.args...))
		})
	}
}

// TestSetChangesTheRun: --set and --fault change what runs, not only
// what is printed: a longer link delay lengthens the run, an added fault
// adds a retransmission, and the capture's comment repeats the flags.
func TestSetChangesTheRun(t *testing.T) {
	_, plain, _ := runCmd("run", "go-back-n", "--json")
	_, slow, _ := runCmd("run", "go-back-n", "--json", "--set", "link.delay=10us")
	assert.Contains(t, plain, `"virtual_time_ns": 4459`)
	assert.Contains(t, slow, `"virtual_time_ns": 40`, "10 µs each way, four flights")

	dir := t.TempDir()
	p := filepath.Join(dir, "f.pcapng")
	code, _, errOut := runCmd("run", "go-back-n", "--quiet", "--pcap", p, "--fault", "drop psn=4 tx=1")
	require.Equal(t, exitBad, code, "the file claims 7 packets from a; the added drop makes more: %s", errOut)
	assert.Contains(t, errOut, "expect counter a.sent_pkts=7: got 10")
	_, out, _ := runCmd("inspect", p)
	assert.Contains(t, out, "dropped by rule 2: drop psn=4 tx=1")
}

// TestHelpFaults: the fault plans' grammar is one command away, from the
// faults package's own documentation.
func TestHelpFaults(t *testing.T) {
	code, out, _ := runCmd("help", "faults")
	if code != exitOK {
		t.Fatalf("help faults: exit %d", code)
	}
	for _, want := range []string{"';' separates rules", "drop class=request psn=2 tx=1", "tx=K", "dir=A->B", "truncate len=N"} {
		assert.Contains(t, out, want)
	}
	_, usageOut, _ := runCmd("help")
	assert.Contains(t, usageOut, "rocesim help faults")
}

// TestFlagsWrittenWithTwoDashes: no usage text shows a flag with one
// dash, except inspect's tshark-style -Y and -c, each beside its long
// name.
func TestFlagsWrittenWithTwoDashes(t *testing.T) {
	for _, cmd := range []string{"run", "inspect", "scenarios", "demo", "fabric", "node", "switch"} {
		_, out, _ := runCmd("help", cmd)
		for _, l := range strings.Split(out, "\n") {
			f := strings.Fields(l)
			if len(f) == 0 || !strings.HasPrefix(f[0], "-") || strings.HasPrefix(f[0], "--") {
				continue
			}
			if cmd == "inspect" && (f[0] == "-Y," || f[0] == "-c,") || f[0] == "-netdev" { // -netdev: QEMU's option
				continue
			}
			t.Errorf("rocesim help %s: a flag written with one dash: %q", cmd, l)
		}
	}
}

// TestOutputNamedLikeABuiltin: --svg go-back-n (no such file) writes
// the picture; only an existing scenario file is protected.
func TestOutputNamedLikeABuiltin(t *testing.T) {
	t.Chdir(t.TempDir())
	code, _, errOut := runCmd("run", "go-back-n", "--quiet", "--svg", "go-back-n")
	require.Equal(t, exitOK, code, errOut)
	_, err := os.Stat("go-back-n")
	assert.NoError(t, err)
}

// TestUnknownFlagWithTwoDashes: every command names an unknown flag the
// way its usage writes flags.
func TestUnknownFlagWithTwoDashes(t *testing.T) {
	for _, cmd := range []string{"run", "inspect", "scenarios", "demo", "fabric", "node", "switch"} {
		code, _, errOut := runCmd(cmd, "--bogus")
		assert.Equal(t, exitUsage, code, cmd)
		assert.Contains(t, errOut, "flag provided but not defined: --bogus", cmd)
	}
}

// TestVersion: --version names the module's version and the toolchain.
func TestVersion(t *testing.T) {
	for _, arg := range []string{"--version", "version"} {
		code, out, _ := runCmd(arg)
		assert.Equal(t, exitOK, code)
		assert.Regexp(t, `^rocesim (\(devel\)|v[0-9][^ ]*)( \([0-9a-f]+( of [^)]*)?(, with uncommitted changes)?\))?, go[0-9.]+.*\n$`, out)
	}
}

// TestPlural: one frame is "1 frame", one completion "1 completion".
func TestPlural(t *testing.T) {
	assert.Equal(t, "1 frame", plural(1, "frame"))
	assert.Equal(t, "0 frames", plural(0, "frame"))
	assert.Equal(t, "2 completions", plural(2, "completion"))
	dir := t.TempDir()
	p := filepath.Join(dir, "one.pcap")
	all := readFrames(t, "../../wire/testdata/ud_send.pcap")
	writePcap(t, p, all[:1])
	_, out, _ := runCmd("inspect", p)
	assert.Contains(t, out, "# 1 frame: ")
}

// TestLadderWidth: COLUMNS first, then the terminal's width, then 80;
// the ladder of go-back-n fits 80 and 132 columns (golden files), and
// COLUMNS reaches it through run.
func TestLadderWidth(t *testing.T) {
	env := func(cols string) func(string) string { return envWith("COLUMNS", cols) }
	f, err := os.Create(filepath.Join(t.TempDir(), "out"))
	require.NoError(t, err)
	defer f.Close()
	assert.Equal(t, 80, ladderWidth(f, env("")))
	assert.Equal(t, 132, ladderWidth(f, env("132")))
	assert.Equal(t, 80, ladderWidth(f, env("wide")), "a COLUMNS that is no number is ignored")
	for _, cols := range []string{"80", "132"} {
		t.Run(cols, func(t *testing.T) {
			t.Setenv("COLUMNS", cols)
			code, out, errOut := runCmd("run", "go-back-n")
			require.Equal(t, exitOK, code, errOut)
			golden(t, filepath.Join("cli", "ladder-"+cols+".txt"), wallTime.ReplaceAllString(out, "wall time X"))
			// The ladder and the summary under it (counters wrap).
			for _, l := range strings.Split(out, "\n") {
				assert.LessOrEqual(t, len([]rune(l)), atoi(cols), "a line wider than %s columns: %q", cols, l)
			}
		})
	}
}

// TestSummaryWidth: every built-in's summary fits 80 columns (and 60),
// wrapped under its first word; nothing is lost by the wrapping.
func TestSummaryWidth(t *testing.T) {
	for _, cols := range []string{"60", "80"} {
		t.Setenv("COLUMNS", cols)
		for _, s := range scenario.Builtin() {
			code, out, errOut := runCmd("run", s.Name, "--quiet")
			require.Equal(t, exitOK, code, "%s: %s", s.Name, errOut)
			for _, l := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
				assert.LessOrEqual(t, len([]rune(l)), atoi(cols), "%s: a summary line wider than %s columns: %q", s.Name, cols, l)
			}
			assert.Contains(t, out, "\nexpectations: ", s.Name)
		}
	}
}

// TestWrapWords: lines break after the separator, go on under the first
// word, and a word too wide for any line stands alone.
func TestWrapWords(t *testing.T) {
	for _, c := range []struct {
		width       int
		prefix, sep string
		words       []string
		want        string
	}{
		{80, "counters a: ", " ", []string{"x=1", "y=2"}, "counters a: x=1 y=2\n"},
		{24, "counters a: ", " ", []string{"rcvd_pkts=5", "sent_pkts=6", "z=1"},
			"counters a: rcvd_pkts=5\n            sent_pkts=6\n            z=1\n"},
		{30, "s: ", ", ", []string{"2 completions", "1 IBV_WC_SUCCESS", "1 IBV_WC_WR_FLUSH_ERR"},
			"s: 2 completions,\n   1 IBV_WC_SUCCESS,\n   1 IBV_WC_WR_FLUSH_ERR\n"},
		{12, "", ", ", []string{"virtual time 4.459µs", "ab"}, "virtual time 4.459µs,\nab\n"},
		{20, "a-very-long-node-name: ", " ", []string{"x=1", "y=2"}, "a-very-long-node-name: x=1\n  y=2\n"},
		// µ is one column though two bytes: 16 characters fit 16.
		{16, "t: ", " ", []string{"4.459µs", "1.0µs"}, "t: 4.459µs 1.0µs\n"},
	} {
		var b strings.Builder
		wrapWords(&b, c.width, c.prefix, c.sep, c.words)
		assert.Equal(t, c.want, b.String(), "%d %q %q", c.width, c.prefix, c.words)
	}
}

func atoi(s string) int {
	var n int
	fmt.Sscan(s, &n)
	return n
}

// TestInspectFilterMatchesTheRun: inspect -Y over a run's capture counts
// what the run counted: in alltoall (four nodes behind a switch, no
// loss) each node's src= frames are its sent_pkts and its dst= frames
// its rcvd_pkts, the first frames to a node that has not yet sent
// included; in go-back-n, the frames its own expect frames lines claim.
func TestInspectFilterMatchesTheRun(t *testing.T) {
	dir := t.TempDir()
	listed := regexp.MustCompile(`; (\d+) listed, matching `)
	count := func(pcap, filter string) int {
		t.Helper()
		code, out, errOut := runCmd("inspect", "-Y", filter, pcap)
		require.Equal(t, exitOK, code, errOut)
		m := listed.FindStringSubmatch(out)
		require.NotNil(t, m, out)
		return atoi(m[1])
	}
	a2a := filepath.Join(dir, "alltoall.pcapng")
	code, out, errOut := runCmd("run", "alltoall", "--json", "--pcap", a2a)
	require.Equal(t, exitOK, code, errOut)
	var res struct {
		Counters map[string]map[string]int `json:"counters"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &res))
	for _, n := range []string{"a", "b", "c", "d"} {
		assert.Equal(t, res.Counters[n]["sent_pkts"], count(a2a, "src="+n), "src=%s", n)
		assert.Equal(t, res.Counters[n]["rcvd_pkts"], count(a2a, "dst="+n), "dst=%s", n)
	}
	gbn := filepath.Join(dir, "go-back-n.pcapng")
	code, _, errOut = runCmd("run", "go-back-n", "--quiet", "--pcap", gbn)
	require.Equal(t, exitOK, code, errOut)
	assert.Equal(t, 1, count(gbn, "class=nak src=b"))
	assert.Equal(t, 3, count(gbn, "src=a tx=2"))
	assert.Equal(t, 1, count(gbn, "src=a tx=1 psn=2"), "the dropped frame is in the capture")
}

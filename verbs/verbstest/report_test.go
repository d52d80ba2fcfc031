package verbstest_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocesim/rocesim/wire/capture"
)

// TestFailureReportOfABrokenKVStore breaks the worked example on purpose
// (-kvstore.break=repost: its client never re-posts a receive) and runs
// one of its fault tests as a user would, with go test. The test fails,
// and its output names the seed, the fault plan and the command that
// re-runs it, and leaves the capture where it says. Running that command
// fails the same way, with the same trace: the report is a reproduction.
func TestFailureReportOfABrokenKVStore(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go test on examples/kvstore (a few seconds to build)")
	}
	root, err := filepath.Abs("../..")
	require.NoError(t, err)
	goTest := func(args ...string) string {
		cmd := exec.Command("go", append([]string{"test"}, args...)...)
		cmd.Dir = root
		out, err := cmd.CombinedOutput()
		var exit *exec.ExitError
		require.ErrorAs(t, err, &exit, "go test must fail:\n%s", out)
		return string(out)
	}
	out := goTest("./examples/kvstore", "-run", "^TestLostWritePacket$", "-count=1", "-kvstore.break=repost", "-rocesim.seed=7")
	t.Logf("go test output:\n%s", out)

	assert.Contains(t, out, "--- FAIL: TestLostWritePacket")
	assert.Contains(t, out, `verbstest: RunUntil("the operation on \"k\""): did not happen`)
	assert.Contains(t, out, "seed:    7\n")
	assert.Regexp(t, `plan:    from 0s: \(none\)\n\s+from [0-9.]+µs: drop src=server op=RC_RDMA_WRITE_MIDDLE tx=1 nth=3\n`, out)
	rerun := "go test ./examples/kvstore -run '^TestLostWritePacket$' -count=1 -kvstore.break=repost -rocesim.seed=7"
	assert.Contains(t, out, "rerun:   "+rerun+"\n")

	pcap, trace := keptFiles(t, out)
	rd, err := capture.Open(pcap)
	require.NoError(t, err)
	frames, rnr := 0, 0
	for rec, err := range rd.Records() {
		require.NoError(t, err)
		frames++
		if strings.Contains(strings.Join(rec.Comments, " "), "RNR NAK") {
			rnr++
		}
	}
	require.NoError(t, rd.Close())
	assert.Greater(t, frames, 100, "the capture holds the run")
	assert.Greater(t, rnr, 100, "and shows why it failed: RNR NAKs, the client never posting a receive again")
	first, err := os.ReadFile(trace)
	require.NoError(t, err)
	lad, err := os.ReadFile(filepath.Join(filepath.Dir(trace), "ladder.txt"))
	require.NoError(t, err)
	assert.Contains(t, string(lad), "RNR", "the ladder draws the RNR NAKs")
	svg, err := os.ReadFile(filepath.Join(filepath.Dir(trace), "ladder.svg"))
	require.NoError(t, err)
	assert.True(t, bytes.HasPrefix(svg, []byte("<svg")) || bytes.HasPrefix(svg, []byte("<?xml")), "ladder.svg is an SVG")

	// The printed command, run again, fails the same way.
	args := strings.Fields(strings.TrimPrefix(rerun, "go test "))
	for i, a := range args {
		args[i] = strings.Trim(a, "'")
	}
	again := goTest(args...)
	_, trace2 := keptFiles(t, again)
	second, err := os.ReadFile(trace2)
	require.NoError(t, err)
	assert.True(t, bytes.Equal(first, second), "the rerun's trace differs from the first run's")
}

var keptRE = regexp.MustCompile(`capture: (\S+capture\.pcapng) .*\n\s+trace:   (\S+trace\.txt) `)

// keptFiles finds the capture and trace a failure report names, checks
// they exist, and removes them when the test ends.
func keptFiles(t *testing.T, out string) (pcap, trace string) {
	t.Helper()
	m := keptRE.FindStringSubmatch(out)
	require.NotNil(t, m, "no capture and trace paths in the output")
	for _, p := range m[1:] {
		_, err := os.Stat(p)
		require.NoError(t, err, "the report names %s", p)
	}
	t.Cleanup(func() { os.RemoveAll(filepath.Dir(m[1])) })
	return m[1], m[2]
}

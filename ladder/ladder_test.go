package ladder_test

import (
	"bytes"
	"encoding/xml"
	"errors"
	"image"
	"image/color"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocesim/rocesim/ladder"
	"github.com/rocesim/rocesim/sim"
)

func text(t *testing.T, tr *sim.Trace, opt ladder.Options) string {
	t.Helper()
	var b strings.Builder
	require.NoError(t, ladder.Text(&b, tr, opt))
	return b.String()
}

func svg(t testing.TB, tr *sim.Trace, opt ladder.Options, title string) []byte {
	t.Helper()
	var b bytes.Buffer
	require.NoError(t, ladder.SVG(&b, tr, opt, title))
	return b.Bytes()
}

// rowIndex returns the index of the first line at or after from that
// contains every one of parts, or fails.
func rowIndex(t *testing.T, ls []string, from int, parts ...string) int {
	t.Helper()
	for i := from; i < len(ls); i++ {
		ok := true
		for _, p := range parts {
			ok = ok && strings.Contains(ls[i], p)
		}
		if ok {
			return i
		}
	}
	t.Fatalf("no line after %d has %q:\n%s", from, parts, strings.Join(ls, "\n"))
	return -1
}

// TestTextGoBackN: the demo's ladder, plain. The lost PSN 101 ends in ✗
// with its rule, b NAKs it, a resends 101 to 103, b ACKs, both complete,
// in that order and in time order.
func TestTextGoBackN(t *testing.T) {
	out := text(t, goBackN(t), ladder.Options{})
	golden(t, "go-back-n.txt", out)
	assert.NotContains(t, out, "\x1b[", "no colour without Options.Color")

	ls := lines(out)
	assert.Regexp(t, `^\s+time\s+a\s+b$`, ls[0], "header: the two hosts")
	i := rowIndex(t, ls, 1, "├─ SEND_FIRST psn=100 ", "▶│")
	i = rowIndex(t, ls, i, "├─ SEND_MIDDLE psn=101 ", "✗ rule 1")
	assert.NotContains(t, ls[i], "▶", "a lost frame has no head")
	i = rowIndex(t, ls, i, "│◀", "NAK(seq) psn=101 msn=0", "─┤")
	for _, psn := range []string{"101", "102", "103"} {
		i = rowIndex(t, ls, i, "├─ SEND_", "psn="+psn, "retx #1", "▶│")
	}
	i = rowIndex(t, ls, i, "✔ wr=1 RECV SUCCESS len=4096 ●")
	i = rowIndex(t, ls, i, "│◀", "ACK psn=103 msn=1")
	rowIndex(t, ls, i, "● ✔ wr=2 SEND SUCCESS")

	var prev sim.Duration
	for _, l := range ls[1:] {
		f := strings.Fields(l)
		d, err := sim.ParseDuration(f[0])
		require.NoError(t, err, "time column of %q", l)
		assert.GreaterOrEqual(t, d, prev, "rows in time order: %q", l)
		prev = d
		assert.LessOrEqual(t, utf8.RuneCountInString(l), ladder.DefaultWidth, "fits the default width: %q", l)
	}
}

var ansiRE = regexp.MustCompile("\x1b\\[[0-9;]*m")

// TestTextColor: colour only with Color, and it changes nothing else.
func TestTextColor(t *testing.T) {
	tr := goBackN(t)
	plain := text(t, tr, ladder.Options{})
	color := text(t, tr, ladder.Options{Color: true})
	assert.Equal(t, plain, ansiRE.ReplaceAllString(color, ""), "colour codes are all that Color adds")
	ls := lines(color)
	assert.Contains(t, ls[rowIndex(t, ls, 0, "✗ rule 1")], "\x1b[31m", "the loss is red")
	assert.Contains(t, ls[rowIndex(t, ls, 0, "✔ wr=2")], "\x1b[32m", "success is green")
	assert.Contains(t, ls[rowIndex(t, ls, 0, "NAK(seq)")], "\x1b[33m", "a NAK is yellow")
	assert.Contains(t, ls[rowIndex(t, ls, 0, "retx #1")], "\x1b[36m", "a retransmission is cyan")
}

// TestTextDeterministic: two runs of the scenario, the same bytes.
func TestTextDeterministic(t *testing.T) {
	for _, sc := range []scenario{{plan: "drop psn=101 tx=1 src=a"}, {hosts: 4, sw: true, size: 2000}} {
		a := text(t, run(t, sc), ladder.Options{Color: true})
		b := text(t, run(t, sc), ladder.Options{Color: true})
		assert.Equal(t, a, b)
	}
}

// TestTextThroughSwitch: through a switch a frame is still one arrow,
// end to end; the switch is no column. A loss beyond the first hop says
// where.
func TestTextThroughSwitch(t *testing.T) {
	out := text(t, run(t, scenario{plan: "drop psn=101 tx=1 src=a", sw: true}), ladder.Options{})
	ls := lines(out)
	assert.Regexp(t, `^\s+time\s+a\s+b$`, ls[0])
	rowIndex(t, ls, 1, "├─ SEND_FIRST psn=100 ", "▶│")
	rowIndex(t, ls, 1, "SEND_MIDDLE psn=101 ", "✗ rule 1: drop")
	rowIndex(t, ls, 1, "│◀", "ACK psn=103 msn=1", "─┤")

	// link= rules act on the named link: the second hop, sw to b.
	out = text(t, run(t, scenario{plan: "drop link=b-sw psn=101 tx=1", sw: true}), ladder.Options{})
	ls = lines(out)
	i := rowIndex(t, ls, 1, "SEND_MIDDLE psn=101 ", "✗ rule 1 at sw")
	// Three quarters of the way, not half.
	x := strings.Index(ls[i], "✗")
	assert.Greater(t, utf8.RuneCountInString(ls[i][:x]), 60, ls[i])
	rowIndex(t, ls, i, "SEND_MIDDLE psn=101 ", "retx #1", "▶│")

	// A frame the switch's egress alters is still the frame a sent,
	// drawn to b with what the rule did, although the fabric traces it
	// with the headers the rule left: a rewritten PSN, a BTH cut short.
	for _, c := range []struct{ plan, row string }{
		{"rewrite set-psn=7 link=b-sw psn=101 tx=1", "├─ SEND_MIDDLE psn=7 · rewritten at sw by rule 1"},
		{"truncate len=50 link=b-sw psn=101 tx=1", "├─ frame len=50 · truncated at sw by rule 1"},
		// Rewritten to the key of the next frame, still in flight
		// toward the switch: the frame the fabric altered (was_psn),
		// not that one, carries the mark.
		{"rewrite set-psn=102 link=b-sw op=RC_SEND_MIDDLE psn=101 tx=1", "├─ SEND_MIDDLE psn=102 · rewritten at sw by rule 1"},
	} {
		out = text(t, run(t, scenario{plan: c.plan, sw: true}), ladder.Options{})
		rowIndex(t, lines(out), 1, c.row, "▶│")
		assert.NotContains(t, out, "not delivered in the trace", c.plan)
	}
}

// TestTextRetryExceeded: timers, the QP's fall to ERR and the error
// completion are notes; the idle stretches before each timeout get a row.
func TestTextRetryExceeded(t *testing.T) {
	out := text(t, run(t, scenario{plan: "drop src=a psn=101", retry: 2}), ladder.Options{})
	ls := lines(out)
	i := rowIndex(t, ls, 0, "✗ rule 1")
	i = rowIndex(t, ls, i, "┊", "later")
	i = rowIndex(t, ls, i, "● ⏱ ack-timeout")
	i = rowIndex(t, ls, i, "SEND_MIDDLE psn=101 · tx=3", "✗ rule 1", "│")
	i = rowIndex(t, ls, i, "● RTS→ERR")
	rowIndex(t, ls, i, "● ✘ wr=2 SEND RETRY_EXC_ERR")
	// retry_cnt 2: the round the NAK for PSN 101 started spends one (rxe's
	// COMPST_ERROR_RETRY), the first timeout the other, the second fails.
	assert.Equal(t, 2, strings.Count(out, "⏱ ack-timeout"))
}

// TestTextRNR: an RNR NAK names its delay; the RNR timer is a note.
func TestTextRNR(t *testing.T) {
	out := text(t, run(t, scenario{noRecv: true, rnr: 1}), ladder.Options{})
	ls := lines(out)
	i := rowIndex(t, ls, 0, "│◀", "RNR-NAK 10µs psn=100")
	i = rowIndex(t, ls, i, "● ⏱ rnr-timer")
	i = rowIndex(t, ls, i, "SEND_FIRST psn=100", "retx #1")
	rowIndex(t, ls, i, "✘ wr=2 SEND RNR_RETRY_EXC_ERR")
}

// TestTextFaultMarks: duplicates, delays, reordering and corruption are
// marked on the frames they touched.
func TestTextFaultMarks(t *testing.T) {
	plan := "dup psn=100 src=a\ndelay 3us psn=102 src=a\nreorder n=1 psn=101 src=a\ncorrupt class=ack first=1\n"
	out := text(t, run(t, scenario{plan: plan, sw: true}), ladder.Options{})
	ls := lines(out)
	i := rowIndex(t, ls, 0, "├─ SEND_FIRST psn=100 · dup by rule 1", "▶│")
	i = rowIndex(t, ls, i, "├─ SEND_FIRST psn=100 · copy by rule 1", "▶│")
	rowIndex(t, ls, i, "├─ SEND_MIDDLE psn=101 · reordered by rule 3", "▶│")
	rowIndex(t, ls, i, "├─ SEND_MIDDLE psn=102 · delayed 3µs by rule 2", "▶│")
	// The first ACK b sends is its re-ACK of the duplicate copy of PSN
	// 100 (rxe acknowledges every duplicate).
	rowIndex(t, ls, i, "ACK psn=100 msn=0 · corrupted by rule 4")
}

// TestTextWidth: every line fits the width asked for, many nodes or few.
func TestTextWidth(t *testing.T) {
	trs := map[string]*sim.Trace{"gbn": goBackN(t), "alltoall": run(t, scenario{hosts: 4, sw: true, size: 2000})}
	for _, name := range []string{"gbn", "alltoall"} {
		for _, w := range []int{40, 72, 100, 160} {
			out := text(t, trs[name], ladder.Options{Width: w})
			for _, l := range lines(out) {
				assert.LessOrEqual(t, utf8.RuneCountInString(l), w, "%s at %d: %q", name, w, l)
			}
		}
	}
	a2a := lines(text(t, trs["alltoall"], ladder.Options{}))
	assert.Regexp(t, `^\s+time\s+a\s+b\s+c\s+d$`, a2a[0])
	rowIndex(t, a2a, 1, "├─ SEND_FIRST psn=100 ─", "┼", "▶│") // a to c, across b
	assert.Equal(t, text(t, trs["gbn"], ladder.Options{}), text(t, trs["gbn"], ladder.Options{Width: ladder.DefaultWidth}))
}

// TestTextNodes: Options.Nodes orders the columns and leaves out the
// others' frames and notes.
func TestTextNodes(t *testing.T) {
	tr := goBackN(t)
	ls := lines(text(t, tr, ladder.Options{Nodes: []string{"b", "a"}}))
	assert.Regexp(t, `^\s+time\s+b\s+a$`, ls[0])
	rowIndex(t, ls, 1, "│◀", "SEND_FIRST psn=100 ─┤")
	rowIndex(t, ls, 1, "├─ ACK psn=103 msn=1 ", "▶│")

	out := text(t, tr, ladder.Options{Nodes: []string{"a"}})
	assert.NotContains(t, out, "SEND_FIRST", "no frames with one end left out")
	assert.Contains(t, out, "✔ wr=2 SEND SUCCESS")
	assert.NotContains(t, out, "wr=1")
}

// TestEmpty: nothing to draw is no error.
func TestEmpty(t *testing.T) {
	assert.Empty(t, text(t, nil, ladder.Options{}))
	assert.Empty(t, text(t, &sim.Trace{}, ladder.Options{}))
	validXML(t, svg(t, nil, ladder.Options{}, "empty"))
}

// TestWriteError: a failing writer's error comes back.
func TestWriteError(t *testing.T) {
	tr := goBackN(t)
	assert.ErrorIs(t, ladder.Text(failWriter{}, tr, ladder.Options{}), errWrite)
	assert.ErrorIs(t, ladder.SVG(failWriter{}, tr, ladder.Options{}, ""), errWrite)
}

var errWrite = errors.New("disk full")

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errWrite }

// validXML decodes every token of doc and returns the root element.
func validXML(t testing.TB, doc []byte) xml.StartElement {
	t.Helper()
	d := xml.NewDecoder(bytes.NewReader(doc))
	var root xml.StartElement
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		require.NoError(t, err, "SVG is not well-formed XML")
		if s, ok := tok.(xml.StartElement); ok && root.Name.Local == "" {
			root = s.Copy()
		}
	}
	return root
}

// svgTexts returns the character data of every <text> element.
func svgTexts(t *testing.T, doc []byte) []string {
	t.Helper()
	d := xml.NewDecoder(bytes.NewReader(doc))
	var out []string
	in := false
	for {
		tok, err := d.Token()
		if err == io.EOF {
			return out
		}
		require.NoError(t, err)
		switch tok := tok.(type) {
		case xml.StartElement:
			in = tok.Name.Local == "text"
			if in {
				out = append(out, "")
			}
		case xml.CharData:
			if in {
				out[len(out)-1] += string(tok)
			}
		case xml.EndElement:
			in = false
		}
	}
}

// svgSize returns the width and height attributes of an SVG root element.
func svgSize(root xml.StartElement) (w, h string) {
	for _, a := range root.Attr {
		switch a.Name.Local {
		case "width":
			w = a.Value
		case "height":
			h = a.Value
		}
	}
	return w, h
}

// TestSVGGoBackN: well-formed, standalone, the labels a reader needs, and
// the same bytes from two runs.
func TestSVGGoBackN(t *testing.T) {
	doc := svg(t, goBackN(t), ladder.Options{}, "go-back-N: PSN 101 lost once")
	root := validXML(t, doc)
	assert.Equal(t, "svg", root.Name.Local)
	assert.Equal(t, "http://www.w3.org/2000/svg", root.Name.Space, "standalone: the SVG namespace")
	w, h := svgSize(root)
	assert.Regexp(t, `^[0-9]{3,4}(\.[0-9])?$`, w, "a sensible width")
	assert.Regexp(t, `^[0-9]{3,4}(\.[0-9])?$`, h, "a sensible height")

	texts := strings.Join(svgTexts(t, doc), "\n")
	for _, want := range []string{
		"go-back-N: PSN 101 lost once",
		"SEND_MIDDLE psn=101", // the lost frame
		"rule 1: drop src=a psn=101 tx=1",
		"NAK(seq) psn=101 msn=0",
		"SEND_MIDDLE psn=101 · retx #1", // its retransmission
		"SEND_LAST psn=103 A · retx #1",
		"ACK psn=103 msn=1",
		"✔ wr=1 RECV SUCCESS len=4096",
		"✔ wr=2 SEND SUCCESS",
		"RESET→INIT→RTR→RTS",
	} {
		assert.Contains(t, texts, want)
	}
	assert.Contains(t, string(doc), `stroke-dasharray="6 3"`, "the lost frame's line is dashed")
	assert.Contains(t, string(doc), `font-family="monospace"`)
	assert.Contains(t, string(doc), `font-family="sans-serif"`)

	again := svg(t, goBackN(t), ladder.Options{}, "go-back-N: PSN 101 lost once")
	assert.Equal(t, doc, again, "same trace, same bytes")
}

// TestSVGScenarios: every scenario gives well-formed XML with its marks;
// a long idle stretch is a break in the time axis.
func TestSVGScenarios(t *testing.T) {
	for _, c := range []struct {
		name string
		sc   scenario
		want []string
	}{
		{"retry", scenario{plan: "drop src=a psn=101", retry: 2}, []string{"ack-timeout", "RTS→ERR", "✘ wr=2 SEND RETRY_EXC_ERR", "later ⋯"}},
		{"faults", scenario{plan: "dup psn=100 src=a\ndelay 3us psn=102 src=a\nreorder n=1 psn=101 src=a\ncorrupt class=ack first=1\n", sw: true},
			[]string{"dup by rule 1", "copy by rule 1", "delayed 3µs by rule 2", "reordered by rule 3", "corrupted by rule 4"}},
		{"switch loss", scenario{plan: "drop link=b-sw psn=101 tx=1", sw: true}, []string{"rule 1 at sw"}},
		{"alltoall", scenario{hosts: 4, sw: true, size: 2000}, []string{"SEND_FIRST psn=400", "ACK psn=101 msn=1"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			doc := svg(t, run(t, c.sc), ladder.Options{}, c.name)
			validXML(t, doc)
			texts := strings.Join(svgTexts(t, doc), "\n")
			for _, w := range c.want {
				assert.Contains(t, texts, w)
			}
		})
	}
}

// TestSVGEscapes: text that is markup in XML stays text.
func TestSVGEscapes(t *testing.T) {
	title := `<b>"a" & 'b'</b>` + "\x01"
	doc := svg(t, goBackN(t), ladder.Options{}, title)
	validXML(t, doc)
	assert.Contains(t, svgTexts(t, doc), `<b>"a" & 'b'</b>`+"\uFFFD")
}

// TestSVGInChromium renders the go-back-N SVG with headless Chromium
// and checks the picture: its size is the SVG's, and the colours of the
// dropped frame, the NAK and the retransmission are all on it. Chromium
// is required under CI=true (.ci/run installs it); elsewhere the test
// skips without it. With LADDER_PNG_DIR set, the SVG and PNG are kept
// there to be looked at.
func TestSVGInChromium(t *testing.T) {
	if testing.Short() && os.Getenv("CI") != "true" {
		t.Skip("starts a browser")
	}
	dir := os.Getenv("LADDER_PNG_DIR")
	if dir == "" {
		dir = t.TempDir()
	}
	doc := svg(t, goBackN(t), ladder.Options{}, "go-back-N: PSN 101 lost once, resent after the NAK")
	svgPath, pngPath := filepath.Join(dir, "go-back-n.svg"), filepath.Join(dir, "go-back-n.png")
	require.NoError(t, os.WriteFile(svgPath, doc, 0o644))
	root := validXML(t, doc)
	w, h := svgSize(root)
	w, _, _ = strings.Cut(w, ".")
	h, _, _ = strings.Cut(h, ".")
	wi, err := strconv.Atoi(w)
	require.NoError(t, err)
	hi, err := strconv.Atoi(h)
	require.NoError(t, err)
	img := ladder.RenderPNG(t, svgPath, pngPath, wi, hi)
	assert.Equal(t, w+"x"+h, strconv.Itoa(img.Bounds().Dx())+"x"+strconv.Itoa(img.Bounds().Dy()))
	for what, ink := range map[string]color.RGBA{
		"dropped frame (red)":   {0xcf, 0x22, 0x2e, 0xff},
		"NAK (amber)":           {0x9a, 0x67, 0x00, 0xff},
		"retransmission (blue)": {0x09, 0x69, 0xda, 0xff},
	} {
		assert.Greater(t, pixelsNear(img, ink), 50, "the picture shows no %s", what)
	}
	t.Logf("rendered %s", pngPath)
}

// pixelsNear counts img's pixels within a small distance of c, so
// anti-aliased strokes of c's colour count.
func pixelsNear(img image.Image, c color.RGBA) int {
	n := 0
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			d := absDiff(r>>8, uint32(c.R)) + absDiff(g>>8, uint32(c.G)) + absDiff(bl>>8, uint32(c.B))
			if d <= 24 {
				n++
			}
		}
	}
	return n
}

func absDiff(a, b uint32) uint32 {
	if a > b {
		return a - b
	}
	return b - a
}

// TestTextManyNodes: more nodes than the width has room for still draws
// (wider than asked), each bar apart.
func TestTextManyNodes(t *testing.T) {
	tr := run(t, scenario{hosts: 8, sw: true, size: 100})
	out := text(t, tr, ladder.Options{Width: 30})
	ls := lines(out)
	assert.Regexp(t, `^\s+time\s+a\s+b\s+c\s+d\s+e\s+f\s+g\s+h$`, ls[0])
	assert.Contains(t, out, "▶│")
	validXML(t, svg(t, tr, ladder.Options{}, "eight"))
}

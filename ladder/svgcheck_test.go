package ladder

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"image"
	"image/png"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocesim/rocesim/scenario"
	"github.com/rocesim/rocesim/sim"
)

// RenderPNG renders the SVG file at svgPath to pngPath with headless
// Chromium in a w×h window, and returns the picture. Chromium is
// required under CI=true (.ci/run installs it); elsewhere the test skips
// without it. (Exported for the external tests of this package.)
func RenderPNG(t testing.TB, svgPath, pngPath string, w, h int) image.Image {
	t.Helper()
	ci := os.Getenv("CI") == "true"
	var browser string
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			browser = p
			break
		}
	}
	if browser == "" {
		if ci {
			t.Fatal("chromium is required when CI=true (.ci/run installs it): not found in PATH")
		}
		t.Skip("no chromium installed (apt-get install chromium)")
	}
	cmd := exec.Command(browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--hide-scrollbars",
		"--user-data-dir="+t.TempDir(), "--window-size="+strconv.Itoa(w)+","+strconv.Itoa(h), "--screenshot="+pngPath, "file://"+svgPath)
	if out, err := cmd.CombinedOutput(); err != nil {
		if ci {
			t.Fatalf("chromium failed: %v\n%s", err, out)
		}
		t.Skipf("chromium could not run here: %v\n%s", err, out)
	}
	f, err := os.Open(pngPath)
	require.NoError(t, err)
	defer f.Close()
	img, err := png.Decode(f)
	require.NoError(t, err)
	return img
}

// svgText is one <text> element of an SVG: where it is and what it says.
type svgText struct {
	text string
	q    quad
}

var translateRotate = regexp.MustCompile(`^translate\(([-0-9.]+) ([-0-9.]+)\) rotate\(([-0-9.]+)\)$`)

// svgTextsOf reads every <text> of doc (but the document's <title>) and
// the rectangle its glyphs cover, from its own attributes: x, y, the
// transform, text-anchor and font-size.
func svgTextsOf(t *testing.T, doc []byte) (texts []svgText, w, h float64) {
	t.Helper()
	d := xml.NewDecoder(bytes.NewReader(doc))
	attr := func(s xml.StartElement, name string) string {
		for _, a := range s.Attr {
			if a.Name.Local == name {
				return a.Value
			}
		}
		return ""
	}
	f := func(s string) float64 {
		v, _ := strconv.ParseFloat(s, 64)
		return v
	}
	var cur *xml.StartElement
	var body strings.Builder
	for {
		tok, err := d.Token()
		if err == io.EOF {
			return texts, w, h
		}
		require.NoError(t, err)
		switch tok := tok.(type) {
		case xml.StartElement:
			if tok.Name.Local == "svg" {
				w, h = f(attr(tok, "width")), f(attr(tok, "height"))
			}
			if tok.Name.Local == "text" {
				c := tok.Copy()
				cur = &c
				body.Reset()
			}
		case xml.CharData:
			if cur != nil {
				body.Write(tok)
			}
		case xml.EndElement:
			if tok.Name.Local != "text" || cur == nil {
				continue
			}
			s := body.String()
			font := f(attr(*cur, "font-size"))
			require.Positive(t, font, "a text without font-size: %q", s)
			start, middle := true, false
			switch attr(*cur, "text-anchor") {
			case "end":
				start = false
			case "middle":
				middle = true
			}
			px, py, angle := f(attr(*cur, "x")), 0.0, 0.0
			base := f(attr(*cur, "y"))
			if m := translateRotate.FindStringSubmatch(attr(*cur, "transform")); m != nil {
				px, py, angle = f(m[1]), f(m[2]), f(m[3])
			}
			n := utf8.RuneCountInString(s)
			if middle {
				px -= float64(n) * font * 0.6 / 2
			}
			texts = append(texts, svgText{s, textQuad(px, py, angle, base, n, font, start)})
			cur = nil
		}
	}
}

// TestSVGBuiltins draws every built-in scenario's SVG ladder and checks
// it as a teacher would look at it: no two pieces of text overlap (by the
// geometry the SVG itself states), a legend says what A, the colours and
// the dashed lines mean, and rendered in headless Chromium the picture
// has the SVG's size and is not blank. With LADDER_PNG_DIR set, the SVGs
// and PNGs are kept there to be looked at.
func TestSVGBuiltins(t *testing.T) {
	if testing.Short() && os.Getenv("CI") != "true" {
		t.Skip("starts a browser per scenario")
	}
	dir := os.Getenv("LADDER_PNG_DIR")
	if dir == "" {
		dir = t.TempDir()
	}
	for _, sc := range scenario.Builtin() {
		t.Run(sc.Name, func(t *testing.T) {
			res, err := sc.Run(scenario.Options{Trace: &sim.Trace{}})
			require.NoError(t, err)
			var b bytes.Buffer
			require.NoError(t, SVG(&b, res.Trace, Options{}, sc.Name+" (seed 1, rxe)"))
			doc := b.Bytes()
			texts, w, h := svgTextsOf(t, doc)
			for i := range texts {
				for j := i + 1; j < len(texts); j++ {
					if texts[i].q.overlaps(texts[j].q) {
						t.Errorf("text %q overlaps text %q", texts[i].text, texts[j].text)
					}
				}
			}
			var all []string
			for _, x := range texts {
				all = append(all, x.text)
			}
			joined := strings.Join(all, "\n")
			for _, legend := range []string{"Legend", "AckReq set: the sender asks for an ACK", "lost: the reason is beside the ✗", "a retransmission"} {
				assert.Contains(t, joined, legend)
			}
			if sc.Name == "go-back-n" {
				assert.Contains(t, joined, "NAK(seq) psn=2 msn=0 · PSN 2 expected, PSN 3 received", "the NAK says what the terminal says")
			}

			svgPath, pngPath := filepath.Join(dir, sc.Name+".svg"), filepath.Join(dir, sc.Name+".png")
			require.NoError(t, os.WriteFile(svgPath, doc, 0o644))
			img := RenderPNG(t, svgPath, pngPath, int(w), int(h))
			assert.Equal(t, fmt.Sprintf("%dx%d", int(w), int(h)), fmt.Sprintf("%dx%d", img.Bounds().Dx(), img.Bounds().Dy()))
			inked := 0
			bd := img.Bounds()
			for y := bd.Min.Y; y < bd.Max.Y; y += 2 {
				for x := bd.Min.X; x < bd.Max.X; x += 2 {
					if r, g, bl, _ := img.At(x, y).RGBA(); r>>8 < 200 || g>>8 < 200 || bl>>8 < 200 {
						inked++
					}
				}
			}
			// A drawing: a percent of its pixels or more inked, far from
			// all of them.
			total := bd.Dx() * bd.Dy() / 4
			assert.Greater(t, inked, total/100, "the picture is (nearly) blank")
			assert.Less(t, inked, total/2, "the picture is mostly ink")
		})
	}
}

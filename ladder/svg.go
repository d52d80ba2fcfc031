package ladder

import (
	"bufio"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/rocesim/rocesim/sim"
)

// SVG geometry, in pixels. Fonts are the generic families, so the width
// of a character is estimated (0.6 em for monospace).
const (
	svgLabelFont = 12.0
	svgNoteFont  = 11.0
	svgTimeFont  = 11.0
	svgRowH      = 22.0  // between two rows that carry text
	svgFlightMin = 72.0  // the median frame flight, drawn, at least
	svgFlightMax = 170.0 // and at most
	svgGapH      = 62.0  // height of a break
	svgTop       = 104.0 // y of the first row
	svgMargin    = 20.0
)

// svgTones are the stroke and fill colours of the tones.
var svgTones = [...]struct{ ink, fill string }{
	toneNone:  {"#24292f", "#f6f8fa"},
	toneOK:    {"#1a7f37", "#dafbe1"},
	toneErr:   {"#cf222e", "#ffebe9"},
	toneWarn:  {"#9a6700", "#fff8c5"},
	toneFault: {"#8250df", "#fbefff"},
	toneRetx:  {"#0969da", "#ddf4ff"},
	toneDim:   {"#57606a", "#f6f8fa"},
}

// svgRow is a row of the SVG: a frame's start or notes of one instant.
type svgRow struct {
	y     float64
	t     sim.Time
	fr    *frame // a frame starts here
	notes []item // or notes, side by side
}

// svgGap is a break in the time axis.
type svgGap struct {
	y1, y2 float64
	d      sim.Duration
}

// svgLayout is the geometry of one SVG ladder.
type svgLayout struct {
	m        *model
	x        []float64 // each node's bar
	width    float64
	height   float64
	timeX    float64 // right edge of the time labels
	rows     []svgRow
	gaps     []svgGap
	startY   map[*frame]float64 // lookups only
	endY     map[*frame]float64 // lookups only
	bottom   float64            // y of the last row
	flightPx float64            // the median flight, drawn
	legend   []legendEntry      // placed
	legendY  float64            // y of the legend's heading
	legendH  float64            // its height
}

func monoW(s string, font float64) float64 { return float64(utf8.RuneCountInString(s)) * font * 0.6 }

// SVG writes the ladder diagram of tr as a standalone SVG document titled
// title: a column per node under its name, virtual time flowing down
// (to scale within a burst, a marked break across long idle stretches),
// each frame an arrow slanting from (sender, time sent) to (receiver,
// time received) labelled along its length, a lost frame ending in a red
// ✗ with the reason, and notes (timers, QP states, completions, async
// events) in boxes on the node's column. Hovering over an arrow or note
// in a browser shows the trace lines behind it. The output is the same
// for the same trace, options and title; Options.Color and Width do not
// apply.
func SVG(w io.Writer, tr *sim.Trace, opt Options, title string) error {
	m := build(tr, opt.Nodes)
	l := layoutSVG(m)
	bw := bufio.NewWriter(w)
	l.write(bw, title)
	return bw.Flush()
}

func layoutSVG(m *model) *svgLayout {
	l := &svgLayout{m: m, startY: map[*frame]float64{}, endY: map[*frame]float64{}}
	n := len(m.nodes)
	// Horizontal: time labels, then the columns, wide enough for the
	// longest label between neighbours and half the widest note either
	// side.
	timeW := monoW("0s", svgTimeFont)
	longest := 0.0
	noteHalf := monoW("RESET→INIT→RTR→RTS", svgNoteFont)/2 + 10
	firstHalf, lastHalf := 60.0, 60.0
	for _, it := range m.items {
		timeW = max(timeW, monoW(fmtTime(it.t), svgTimeFont))
		switch it.kind {
		case itemFrame:
			if d := it.fr.to - it.fr.from; d == 1 || d == -1 {
				longest = max(longest, monoW(it.fr.labels()[0], svgLabelFont))
			}
		case itemNote:
			h := monoW(it.text, svgNoteFont)/2 + 10
			noteHalf = max(noteHalf, min(h, 170))
			if it.node == 0 {
				firstHalf = max(firstHalf, h)
			}
			if it.node == n-1 && n > 0 {
				lastHalf = max(lastHalf, h)
			}
		}
	}
	sp := min(max(longest+90, 2*noteHalf+20, 360), 600)
	if n > 3 {
		sp = max(min(sp, 1500/float64(n-1)), 220) // many nodes: labels shorten
	}
	l.timeX = svgMargin + timeW
	x0 := l.timeX + 16 + min(firstHalf, 180)
	l.x = make([]float64, n)
	for i := range l.x {
		l.x[i] = x0 + float64(i)*sp
	}
	right := x0 + 120
	if n > 0 {
		right = l.x[n-1] + min(lastHalf, 180) + svgMargin
	}
	l.width = math.Ceil(max(right, 360))

	// Vertical: time to scale, at least a row apart where there is text.
	lat := m.latency
	if lat <= 0 {
		lat = sim.Microsecond
	}
	scale := svgScale(m, lat)
	capPx := max(3*float64(lat)*scale, 150)
	l.flightPx = float64(lat) * scale
	y, lastRow := svgTop, svgTop-svgRowH
	var prev sim.Time
	first := true
	advance := func(t sim.Time) {
		if !first {
			px := float64(t.Sub(prev)) * scale
			if px > capPx {
				l.gaps = append(l.gaps, svgGap{y1: y + 24, y2: y + svgGapH - 14, d: t.Sub(prev)})
				px = svgGapH
			}
			y += px
		}
		prev, first = t, false
	}
	row := func(r svgRow) {
		y = max(y, lastRow+svgRowH)
		lastRow = y
		r.y = y
		l.rows = append(l.rows, r)
	}
	items := m.items
	for i := 0; i < len(items); i++ {
		it := items[i]
		advance(it.t)
		switch it.kind {
		case itemFrame:
			row(svgRow{t: it.t, fr: it.fr})
			l.startY[it.fr] = y
		case itemEnd:
			// An arrow descends by its flight time to scale from where it
			// started, however far rows of text pushed its start down:
			// frames with equal flights stay parallel.
			y = max(y, l.startY[it.fr]+max(float64(it.t.Sub(it.fr.t))*scale, 16))
			l.endY[it.fr] = y
			lastRow = max(lastRow, y-svgRowH+12) // text below the arrowhead
		case itemNote:
			group := []item{it}
			for i+1 < len(items) && items[i+1].kind == itemNote && items[i+1].t == it.t {
				i++
				group = append(group, items[i])
			}
			for _, ns := range l.packNotes(group) {
				row(svgRow{t: it.t, notes: ns})
			}
		}
	}
	l.bottom = y
	l.legendY = y + 24 + 28 + 34
	l.layoutLegend()
	l.height = math.Ceil(l.legendY + l.legendH + svgMargin)
	return l
}

// legendEntry is one key of the legend: a sample and what it means.
type legendEntry struct {
	sample string // "line", "dashed", "A", "gap"
	tone   tone
	text   string
	x, y   float64
}

// legendEntries say what the drawing's marks mean, for a reader who has
// not read the package doc.
var legendEntries = []legendEntry{
	{sample: "line", tone: toneNone, text: "a frame: leaves its sender's bar, arrives at the receiver's"},
	{sample: "dashed", tone: toneErr, text: "lost: the reason is beside the ✗"},
	{sample: "line", tone: toneOK, text: "ACK; a completion with SUCCESS"},
	{sample: "line", tone: toneWarn, text: "NAK, RNR NAK; a timer"},
	{sample: "line", tone: toneRetx, text: "a retransmission"},
	{sample: "line", tone: toneFault, text: "touched by the fault plan (dup, delay, rewrite...)"},
	{sample: "A", tone: toneNone, text: "AckReq set: the sender asks for an ACK"},
	{sample: "gap", tone: toneDim, text: "idle time cut out of the axis"},
}

// layoutLegend flows the legend's entries into rows below the diagram.
func (l *svgLayout) layoutLegend() {
	x, y := svgMargin, l.legendY+18
	for _, e := range legendEntries {
		w := 40 + monoW(e.text, svgNoteFont) + 24
		if x > svgMargin && x+w > l.width-svgMargin {
			x, y = svgMargin, y+20
		}
		e.x, e.y = x, y
		l.legend = append(l.legend, e)
		x += w
	}
	l.legendH = y - l.legendY + 10
}

// writeLegend draws the legend.
func (l *svgLayout) writeLegend(w svgWriter) {
	w.p(`<text x="`, num(svgMargin), `" y="`, num(l.legendY), `" font-family="sans-serif" font-size="12" font-weight="bold" fill="#24292f">Legend</text>`)
	for _, e := range l.legend {
		ink := svgTones[e.tone].ink
		x0, x1, y := e.x, e.x+32, e.y
		switch e.sample {
		case "line":
			w.p(`<line x1="`, num(x0), `" y1="`, num(y-4), `" x2="`, num(x1), `" y2="`, num(y-4), `" stroke="`, ink, `" stroke-width="1.5" marker-end="url(#head`, itoa(int(e.tone)), `)"/>`)
		case "dashed":
			w.p(`<line x1="`, num(x0), `" y1="`, num(y-4), `" x2="`, num(x1-8), `" y2="`, num(y-4), `" stroke="`, ink, `" stroke-width="1.5" stroke-dasharray="6 3"/>`)
			w.p(`<path d="M`, num(x1-7), `,`, num(y-9), ` L`, num(x1+1), `,`, num(y+1), ` M`, num(x1+1), `,`, num(y-9), ` L`, num(x1-7), `,`, num(y+1), `" stroke="`, ink, `" stroke-width="2.5" stroke-linecap="round"/>`)
		case "A":
			w.p(`<text x="`, num(x0+16), `" y="`, num(y), `" text-anchor="middle" font-size="`, num(svgLabelFont), `" fill="`, ink, `">A</text>`)
		case "gap":
			w.p(`<line x1="`, num(x0+16), `" y1="`, num(y-12), `" x2="`, num(x0+16), `" y2="`, num(y+4), `" stroke="#8c959f" stroke-width="1.5" stroke-dasharray="3 4"/>`)
		}
		w.p(`<text x="`, num(x1+8), `" y="`, num(y), `" font-size="`, num(svgNoteFont), `" fill="#24292f">`, esc(e.text), `</text>`)
	}
}

// svgScale is pixels per nanosecond: the median flight drawn between
// svgFlightMin and svgFlightMax, as tall as lets the closest rows of a
// burst (the quartile of the times between rows) lie a row apart, so that
// rows seldom push time down and the slopes stay true.
func svgScale(m *model, lat sim.Duration) float64 {
	var dts []sim.Duration
	var prev sim.Time
	first := true
	for _, it := range m.items {
		if it.kind == itemEnd {
			continue
		}
		if !first && it.t > prev {
			dts = append(dts, it.t.Sub(prev))
		}
		prev, first = it.t, false
	}
	want := svgFlightMin / float64(lat)
	if len(dts) > 0 {
		slices.Sort(dts)
		want = svgRowH / float64(dts[len(dts)/4])
	}
	return min(max(want, svgFlightMin/float64(lat)), svgFlightMax/float64(lat))
}

// noteBox is where a note's box goes: centred on its column, or across
// the diagram for the fabric's notes.
func (l *svgLayout) noteBox(it item) (cx, w float64) {
	w = monoW(it.text, svgNoteFont) + 14
	if it.node < 0 {
		if len(l.x) == 0 {
			return l.width / 2, w
		}
		return (l.x[0] + l.x[len(l.x)-1]) / 2, w
	}
	return l.x[it.node], w
}

// packNotes puts notes of one instant side by side where their boxes do
// not overlap.
func (l *svgLayout) packNotes(group []item) [][]item {
	var rows [][]item
	for _, it := range group {
		cx, w := l.noteBox(it)
		done := false
		for i := range rows {
			ok := true
			for _, o := range rows[i] {
				ox, ow := l.noteBox(o)
				if math.Abs(cx-ox) < (w+ow)/2+8 {
					ok = false
				}
			}
			if ok {
				rows[i] = append(rows[i], it)
				done = true
				break
			}
		}
		if !done {
			rows = append(rows, []item{it})
		}
	}
	return rows
}

// num formats a coordinate: one decimal at most.
func num(v float64) string {
	s := strconv.FormatFloat(math.Round(v*10)/10, 'f', 1, 64)
	return strings.TrimSuffix(s, ".0")
}

// esc escapes text for XML, replacing characters XML cannot hold.
func esc(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '&':
			b.WriteString("&amp;")
		case r == '<':
			b.WriteString("&lt;")
		case r == '>':
			b.WriteString("&gt;")
		case r == '"':
			b.WriteString("&quot;")
		case r == '\'':
			b.WriteString("&apos;")
		case r == '\t' || r == '\n' || r == '\r':
			b.WriteRune(r)
		case r < 0x20 || r == 0xFFFE || r == 0xFFFF || r >= 0xD800 && r < 0xE000:
			b.WriteRune('\uFFFD')
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// svgWriter writes elements.
type svgWriter struct{ *bufio.Writer }

func (w svgWriter) p(parts ...string) {
	for _, s := range parts {
		w.WriteString(s)
	}
	w.WriteByte('\n')
}

func (l *svgLayout) write(bw *bufio.Writer, title string) {
	w := svgWriter{bw}
	W, H := num(l.width), num(l.height)
	w.p(`<?xml version="1.0" encoding="UTF-8"?>`)
	w.p(`<svg xmlns="http://www.w3.org/2000/svg" width="`, W, `" height="`, H, `" viewBox="0 0 `, W, ` `, H, `" font-family="monospace">`)
	w.p(`<title>`, esc(title), `</title>`)
	w.p(`<defs>`)
	for t, c := range svgTones {
		w.p(`<marker id="head`, itoa(t), `" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse"><path d="M0,1 L10,5 L0,9 z" fill="`, c.ink, `"/></marker>`)
	}
	w.p(`</defs>`)
	w.p(`<rect width="100%" height="100%" fill="#ffffff"/>`)
	if title != "" {
		w.p(`<text x="`, num(svgMargin), `" y="32" font-family="sans-serif" font-size="18" font-weight="bold" fill="#24292f">`, esc(title), `</text>`)
	}
	w.p(`<text x="`, num(l.timeX), `" y="`, num(svgTop-26), `" text-anchor="end" font-family="sans-serif" font-size="11" fill="#57606a">time ↓</text>`)

	// Columns: a bar per node, dashed across the breaks, its name at both ends.
	top, bottom := svgTop-18, l.bottom+24
	for i, x := range l.x {
		y := top
		for _, g := range l.gaps {
			w.p(`<line x1="`, num(x), `" y1="`, num(y), `" x2="`, num(x), `" y2="`, num(g.y1), `" stroke="#8c959f" stroke-width="1.5"/>`)
			w.p(`<line x1="`, num(x), `" y1="`, num(g.y1), `" x2="`, num(x), `" y2="`, num(g.y2), `" stroke="#8c959f" stroke-width="1.5" stroke-dasharray="3 4"/>`)
			y = g.y2
		}
		w.p(`<line x1="`, num(x), `" y1="`, num(y), `" x2="`, num(x), `" y2="`, num(bottom), `" stroke="#8c959f" stroke-width="1.5"/>`)
		name := l.m.nodes[i]
		bw := max(monoW(name, 14)+24, 56)
		for _, by := range []float64{top - 30, bottom} {
			w.p(`<rect x="`, num(x-bw/2), `" y="`, num(by), `" width="`, num(bw), `" height="28" rx="5" fill="#eaeef2" stroke="#57606a"/>`)
			w.p(`<text x="`, num(x), `" y="`, num(by+19), `" text-anchor="middle" font-family="sans-serif" font-size="14" font-weight="bold" fill="#24292f">`, esc(name), `</text>`)
		}
	}
	for _, g := range l.gaps {
		mid := (g.y1 + g.y2) / 2
		cx := l.width / 2
		if len(l.x) > 1 {
			cx = (l.x[0] + l.x[len(l.x)-1]) / 2
		}
		w.p(`<text x="`, num(cx), `" y="`, num(mid+4), `" text-anchor="middle" font-family="sans-serif" font-size="12" font-style="italic" fill="#57606a" stroke="#ffffff" stroke-width="4" paint-order="stroke">⋯ `, esc(g.d.String()), ` later ⋯</text>`)
	}

	// Time labels.
	for _, r := range l.rows {
		w.p(`<text x="`, num(l.timeX), `" y="`, num(r.y+4), `" text-anchor="end" font-size="`, num(svgTimeFont), `" fill="#57606a">`, esc(fmtTime(r.t)), `</text>`)
	}
	// Lines, then the losses, then their labels, then the notes: what
	// is drawn later stays readable where things cross, and no text
	// covers other text (svgplace.go).
	taken := l.fixedText()
	var arrows []svgArrow
	for i, r := range l.rows {
		if r.fr != nil {
			arrows = append(arrows, l.arrow(r.fr, r.y, i))
		}
	}
	for _, a := range arrows {
		l.writeLine(w, a)
	}
	said := map[string]float64{} // loss text and x → lowest y written; lookups only
	for _, a := range arrows {
		if !a.f.delivered {
			l.writeLoss(w, a, said, &taken)
		}
	}
	for _, a := range arrows {
		l.writeLabel(w, a, &taken)
	}
	for _, r := range l.rows {
		for _, it := range r.notes {
			if it.node < 0 && len(l.x) > 0 {
				// The fabric's notes (link changes) span the diagram.
				w.p(`<line x1="`, num(l.x[0]-30), `" y1="`, num(r.y), `" x2="`, num(l.x[len(l.x)-1]+30), `" y2="`, num(r.y),
					`" stroke="`, svgTones[it.tone].ink, `" stroke-width="1" stroke-dasharray="8 4"/>`)
			}
		}
	}
	for _, r := range l.rows {
		for _, it := range r.notes {
			l.writeNote(w, it, r.y)
		}
	}
	l.writeLegend(w)
	w.p(`</svg>`)
}

// fixedText returns the places of the text that does not move: the
// node boxes, the time labels, the breaks' captions, the notes.
func (l *svgLayout) fixedText() placedText {
	var p placedText
	top, bottom := svgTop-18, l.bottom+24
	for i, x := range l.x {
		bw := max(monoW(l.m.nodes[i], 14)+24, 56)
		p = append(p, boxQuad(x-bw/2, top-30, bw, 28), boxQuad(x-bw/2, bottom, bw, 28))
	}
	for _, r := range l.rows {
		tw := monoW(fmtTime(r.t), svgTimeFont)
		p = append(p, boxQuad(l.timeX-tw, r.y+4-0.8*svgTimeFont, tw, svgTimeFont*1.05))
		for _, it := range r.notes {
			cx, bw := l.noteBox(it)
			p = append(p, boxQuad(cx-bw/2, r.y-9, bw, 18))
		}
	}
	for _, g := range l.gaps {
		cx := l.width / 2
		if len(l.x) > 1 {
			cx = (l.x[0] + l.x[len(l.x)-1]) / 2
		}
		tw := monoW("⋯ "+g.d.String()+" later ⋯", 12)
		p = append(p, boxQuad(cx-tw/2, (g.y1+g.y2)/2+4-10, tw, 13))
	}
	return p
}

// svgArrow is the geometry of one frame's arrow.
type svgArrow struct {
	f              *frame
	xs, ys, x2, y2 float64 // from the sender to the head, or to the ✗
	xd             float64 // the receiver's bar (or the neighbour's, for a frame lost before anyone could tell where it went)
}

// delivered returns the height of row i's arrow if it is a delivered
// frame between f's columns.
func (l *svgLayout) delivered(i int, f *frame) (float64, bool) {
	if i < 0 || i >= len(l.rows) {
		return 0, false
	}
	g := l.rows[i].fr
	if g == nil || !g.delivered || g.from != f.from || f.to >= 0 && g.to != f.to {
		return 0, false
	}
	return l.endY[g] - l.rows[i].y, true
}

// arrow places frame f, which starts at y on row ri.
func (l *svgLayout) arrow(f *frame, y float64, ri int) svgArrow {
	a := svgArrow{f: f, xs: l.x[f.from], ys: y}
	switch {
	case f.to >= 0:
		a.xd = l.x[f.to]
	case f.from+1 < len(l.x):
		a.xd = l.x[f.from+1]
	case f.from > 0:
		a.xd = l.x[f.from-1]
	default:
		a.xd = a.xs + 200
	}
	yd, ok := l.endY[f]
	if !ok {
		// Never arrived, or lost before it left: as steep as the arrows
		// that did arrive between the same columns just before and after
		// it (on average; the median flight if none is near), so that it
		// runs between them, and not into the next break of the time axis.
		var sum float64
		var n int
		for _, step := range []int{-1, 1} {
			for d := 1; d <= 40; d++ {
				if h, ok := l.delivered(ri+step*d, f); ok {
					sum, n = sum+h, n+1
					break
				}
			}
		}
		yd = y + l.flightPx
		if n > 0 {
			yd = y + sum/float64(n)
		}
		for _, g := range l.gaps {
			if g.y1 > y && g.y1 < yd {
				yd = max(g.y1-6, y+16)
			}
		}
	}
	a.x2, a.y2 = a.xd, yd
	if !f.delivered {
		frac := 0.5
		if f.lostHop > 0 {
			frac = 0.75
		}
		a.x2 = a.xs + frac*(a.xd-a.xs)
		if !ok {
			a.y2 = y + frac*(yd-y)
		}
	}
	return a
}

// writeLine draws the arrow's line, with a head if the frame arrived.
func (l *svgLayout) writeLine(w svgWriter, a svgArrow) {
	t := a.f.tone()
	w.p(`<g>`)
	w.p(`<title>`, esc(l.m.lines(a.f.evs)), `</title>`)
	line := `<line x1="` + num(a.xs) + `" y1="` + num(a.ys) + `" x2="` + num(a.x2) + `" y2="` + num(a.y2) + `" stroke="` + svgTones[t].ink + `" stroke-width="1.5"`
	if a.f.delivered {
		w.p(line, ` marker-end="url(#head`, itoa(int(t)), `)"/>`)
	} else {
		w.p(line, ` stroke-dasharray="6 3"/>`)
	}
	w.p(`</g>`)
}

// writeLabel writes the frame's label along its arrow, above the line:
// the fullest of its variants that fits (the terminal's, with the
// sender's notes, first), at the first distance from the sender's end
// where it covers no text placed before; none if no variant fits
// anywhere (the tooltip has it).
func (l *svgLayout) writeLabel(w svgWriter, a svgArrow, taken *placedText) {
	dx, dy := a.x2-a.xs, a.y2-a.ys
	length := math.Hypot(dx, dy)
	ux, uy := dx/length, dy/length
	room := length - 26
	if !a.f.delivered {
		room = length - 16
	}
	anchor := "start"
	angle := math.Atan2(dy, dx) * 180 / math.Pi
	if dx < 0 {
		anchor = "end"
		angle = math.Atan2(-dy, -dx) * 180 / math.Pi
	}
	for _, v := range a.f.labels() {
		n := utf8.RuneCountInString(v)
		wpx := float64(n) * svgLabelFont * 0.6
		for off := 12.0; off+wpx <= 12+room; off += 14 {
			// off pixels along the arrow from the sender; a leftward
			// arrow's label is anchored at its end there, so that it reads
			// left to right.
			px, py := a.xs+ux*off, a.ys+uy*off
			q := textQuad(px, py, angle, -5, n, svgLabelFont, anchor == "start")
			if !taken.free(q) {
				continue
			}
			*taken = append(*taken, q)
			w.p(`<text transform="translate(`, num(px), ` `, num(py), `) rotate(`, num(angle), `)" y="-5" text-anchor="`, anchor,
				`" font-size="`, num(svgLabelFont), `" fill="`, svgTones[a.f.tone()].ink, `" stroke="#ffffff" stroke-width="3" paint-order="stroke">`, esc(v), `</text>`)
			return
		}
	}
}

// writeLoss draws the ✗ (or ? for a frame the trace never saw arrive)
// where the frame ended, and the reason beside it on the receiver's side,
// unless the same reason is written just above (frames lost together at
// a switch).
func (l *svgLayout) writeLoss(w svgWriter, a svgArrow, said map[string]float64, taken *placedText) {
	red := svgTones[toneErr].ink
	x, y := a.x2, a.y2
	if a.f.lost {
		d := `M` + num(x-6) + `,` + num(y-6) + ` L` + num(x+6) + `,` + num(y+6) + ` M` + num(x+6) + `,` + num(y-6) + ` L` + num(x-6) + `,` + num(y+6)
		w.p(`<path d="`, d, `" stroke="`, red, `" stroke-width="2.5" stroke-linecap="round"/>`)
	} else {
		w.p(`<text x="`, num(x), `" y="`, num(y+5), `" text-anchor="middle" font-size="14" font-weight="bold" fill="`, red, `">?</text>`)
	}
	room := math.Abs(a.xd-x) - 24
	anchor, tx := "start", x+12
	if a.xd < a.xs {
		anchor, tx = "end", x-12
	}
	why := string(fitOne(a.f.lossTexts(), int(room/(svgNoteFont*0.6))))
	key := why + "@" + num(tx)
	if last, ok := said[key]; ok && y-last < 16 {
		return
	}
	q := textQuad(tx, y+4, 0, 0, utf8.RuneCountInString(why), svgNoteFont, anchor == "start")
	if !taken.free(q) {
		short := a.f.lossTexts()
		why = short[len(short)-1]
		q = textQuad(tx, y+4, 0, 0, utf8.RuneCountInString(why), svgNoteFont, anchor == "start")
		if !taken.free(q) {
			return // the arrow's tooltip says why
		}
	}
	*taken = append(*taken, q)
	said[key] = y
	w.p(`<text x="`, num(tx), `" y="`, num(y+4), `" text-anchor="`, anchor, `" font-size="`, num(svgNoteFont), `" fill="`, red,
		`" stroke="#ffffff" stroke-width="3" paint-order="stroke">`, esc(why), `</text>`)
}

// writeNote draws a note's box at y. A timer's ⏱ is drawn, not written:
// the generic fonts seldom have it.
func (l *svgLayout) writeNote(w svgWriter, it item, y float64) {
	cx, bw := l.noteBox(it)
	c := svgTones[it.tone]
	text, clock := strings.CutPrefix(it.text, "⏱ ")
	w.p(`<g>`)
	w.p(`<title>`, esc(l.m.lines(it.evs)), `</title>`)
	w.p(`<rect x="`, num(cx-bw/2), `" y="`, num(y-9), `" width="`, num(bw), `" height="18" rx="4" fill="`, c.fill, `" stroke="`, c.ink, `"/>`)
	tx := cx
	if clock {
		ix := cx - bw/2 + 11
		tx = cx + 5
		w.p(`<circle cx="`, num(ix), `" cy="`, num(y), `" r="5" fill="none" stroke="`, c.ink, `" stroke-width="1.3"/>`)
		w.p(`<path d="M`, num(ix), `,`, num(y-3), ` L`, num(ix), `,`, num(y), ` L`, num(ix+2.5), `,`, num(y+1.5), `" fill="none" stroke="`, c.ink, `" stroke-width="1.3"/>`)
	}
	w.p(`<text x="`, num(tx), `" y="`, num(y+4), `" text-anchor="middle" font-size="`, num(svgNoteFont), `" fill="`, c.ink, `">`, esc(text), `</text>`)
	w.p(`</g>`)
}

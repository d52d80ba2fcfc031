package ladder

import (
	"bufio"
	"io"
	"strings"

	"github.com/rocesim/rocesim/sim"
)

// Options says how to draw a ladder.
type Options struct {
	// Nodes are the columns, left to right. Empty: the hosts in the order
	// they first appear in the trace (switches are never columns; a frame
	// through a switch is drawn end to end). Frames and notes of nodes
	// left out are not drawn.
	Nodes []string
	// Color adds ANSI colours to Text: red for losses and errors, green
	// for success, yellow for timers and NAKs, magenta for the fault
	// plan's interventions, cyan for retransmissions. SVG always has
	// colour.
	Color bool
	// Width is the terminal's width in columns for Text (default 100).
	Width int
}

// DefaultWidth is the terminal width Text assumes when Options.Width is 0.
const DefaultWidth = 100

// minWidth is the narrowest ladder Text draws; a smaller Width is raised.
const minWidth = 40

// cell is one character of the terminal drawing.
type cell struct {
	r    rune
	tone tone
	bold bool
}

// textLayout places the columns of a terminal ladder.
type textLayout struct {
	m      *model
	opt    Options
	width  int
	timeW  int   // width of the time column
	pos    []int // x of each node's bar
	gapMin sim.Duration
}

// Text writes the ladder diagram of tr for a terminal: virtual time on
// the left, one column per node, one row per frame (an arrow from sender
// to receiver at the time the sender put it on the wire, ending in ✗ and
// the reason where it was lost) and per note (timers, QP state changes,
// async events, completions, link changes). Rows come in trace order; a
// stretch of idle time much longer than a frame's flight gets a row of
// its own saying how long. The output is the same for the same trace and
// options, and plain UTF-8 without Options.Color.
func Text(w io.Writer, tr *sim.Trace, opt Options) error {
	m := build(tr, opt.Nodes)
	if len(m.nodes) == 0 {
		return nil
	}
	l := &textLayout{m: m, opt: opt, width: opt.Width}
	if l.width <= 0 {
		l.width = DefaultWidth
	}
	l.width = max(l.width, minWidth)
	l.timeW = len([]rune("time"))
	for _, it := range m.items {
		l.timeW = max(l.timeW, len([]rune(fmtTime(it.t))))
	}
	n := len(m.nodes)
	left := l.timeW + 3
	l.width = max(l.width, left+3*(n-1)+2) // bars at least three apart, however narrow the terminal
	right := l.width - 2
	l.pos = make([]int, n)
	for i := range l.pos {
		if n > 1 {
			l.pos[i] = left + i*(right-left)/(n-1)
		} else {
			l.pos[i] = left
		}
	}
	l.gapMin = gapThreshold(m)

	bw := bufio.NewWriter(w)
	l.writeRow(bw, "time", l.header())
	var prev sim.Time
	started := false
	emit := func(t sim.Time, row []cell) {
		if started && t.Sub(prev) > l.gapMin {
			l.writeRow(bw, "", l.gapRow(t.Sub(prev)))
		}
		prev, started = t, true
		l.writeRow(bw, fmtTime(t), row)
	}
	items := m.items
	for i := 0; i < len(items); i++ {
		it := items[i]
		switch it.kind {
		case itemFrame:
			emit(it.t, l.arrowRow(it.fr))
		case itemNote:
			group := []item{it}
			for i+1 < len(items) && (items[i+1].kind == itemEnd || items[i+1].kind == itemNote && items[i+1].t == it.t) {
				i++
				if items[i].kind == itemNote {
					group = append(group, items[i])
				}
			}
			for _, row := range l.noteRows(group) {
				emit(it.t, row)
			}
		}
	}
	return bw.Flush()
}

// gapThreshold is the idle time that earns a row of its own: ten frame
// flights (the median), or 100µs when nothing arrived.
func gapThreshold(m *model) sim.Duration {
	if m.latency > 0 {
		return 10 * m.latency
	}
	return 100 * sim.Microsecond
}

// blank returns a row with every node's bar.
func (l *textLayout) blank(bar rune) []cell {
	row := make([]cell, l.width)
	for i := range row {
		row[i].r = ' '
	}
	for _, p := range l.pos {
		row[p].r = bar
	}
	return row
}

// put writes s into row from x on, as far as the row goes.
func put(row []cell, x int, s string, t tone) {
	for _, r := range s {
		if x >= 0 && x < len(row) {
			row[x] = cell{r: r, tone: t}
		}
		x++
	}
}

func (l *textLayout) header() []cell {
	row := l.blank(' ')
	for i, name := range l.m.nodes {
		rs := []rune(name)
		x := l.pos[i] - (len(rs)-1)/2
		x = min(max(x, l.timeW+1), l.width-len(rs))
		for j, r := range rs {
			if x+j >= 0 && x+j < l.width {
				row[x+j] = cell{r: r, bold: true}
			}
		}
	}
	return row
}

func (l *textLayout) gapRow(d sim.Duration) []cell {
	row := l.blank('┊')
	s := "⋯ " + d.String() + " later ⋯"
	first, last := l.pos[0], l.pos[len(l.pos)-1]
	x := first + 2
	if last > first {
		x = max(first+2, (first+last)/2-len([]rune(s))/2)
	}
	put(row, x, s, toneDim)
	return row
}

// arrowRow draws frame f from its sender's bar toward its receiver's.
func (l *textLayout) arrowRow(f *frame) []cell {
	row := l.blank('│')
	xs := l.pos[f.from]
	var xd int
	switch {
	case f.to >= 0:
		xd = l.pos[f.to]
	case f.from+1 < len(l.pos):
		xd = l.pos[f.from+1] // lost before its receiver was known: toward a neighbour
	case f.from > 0:
		xd = l.pos[f.from-1]
	default:
		xd = min(xs+40, l.width-1)
	}
	span := max(xd, xs) - min(xd, xs) - 1
	seg := arrowSegment(f, span, xd > xs)
	lo := min(xs, xd) + 1
	t := f.tone()
	for i, r := range seg {
		row[lo+i] = cell{r: r, tone: t}
	}
	for _, p := range l.pos {
		if p > lo-1 && p < lo+span && row[p].r == '─' {
			row[p].r = '┼'
		}
	}
	if xd > xs {
		row[xs].r = '├'
	} else {
		row[xs].r = '┤'
	}
	return row
}

// arrowSegment is the arrow between the two bars, span cells, read left
// to right: "─ LABEL ────▶" or "◀──── LABEL ─", and for a frame that never
// arrived "─ LABEL ──✗ rule 1" (✗ half-way, or three quarters when it was
// lost beyond the first hop; "?" when the trace ends before it arrives).
func arrowSegment(f *frame, span int, right bool) []rune {
	seg := make([]rune, span)
	for i := range seg {
		seg[i] = '─'
	}
	if span <= 0 {
		return seg
	}
	labels := f.labels()
	// place writes rs at distance d from the sender's end (reading left to
	// right whichever way the arrow goes).
	place := func(d int, rs []rune) {
		start := d
		if !right {
			start = span - d - len(rs)
		}
		for i, r := range rs {
			if j := start + i; j >= 0 && j < span {
				seg[j] = r
			}
		}
	}
	if f.delivered {
		head := []rune("▶")
		if !right {
			head = []rune("◀")
		}
		place(span-1, head)
		room := span - 5
		label := fitOne(labels, room)
		if label != nil {
			place(1, append(append([]rune{' '}, label...), ' '))
		}
		return seg
	}
	marker := '✗'
	if !f.lost {
		marker = '?'
	}
	frac := 0.5
	if f.lostHop > 0 {
		frac = 0.75
	}
	mid := int(frac * float64(span))
	losses := f.lossTexts()
	var label, loss []rune
	x := 0
	found := false
	for _, lb := range labels {
		for _, lo := range losses {
			lr, or := []rune(lb), []rune(lo)
			x = max(mid, len(lr)+4)
			if x+3+len(or) <= span { // a blank before the receiver's bar
				label, loss, found = lr, or, true
				break
			}
		}
		if found {
			break
		}
	}
	if !found {
		// Too narrow for both: the short loss text, and what is left of
		// the compact label.
		loss = []rune(losses[len(losses)-1])
		x = max(min(mid, span-len(loss)-3), 1)
		label = fitOne(labels, x-4)
	}
	for d := x + 1; d < span; d++ {
		place(d, []rune{' '})
	}
	place(x, []rune{marker})
	if x+3+len(loss) <= span {
		place(x+2, loss)
	}
	if label != nil {
		place(1, append(append([]rune{' '}, label...), ' '))
	}
	return seg
}

// fitOne returns the first of variants no longer than room, or the last
// cut to room with "…"; nil when room is less than two.
func fitOne(variants []string, room int) []rune {
	for _, v := range variants {
		if rs := []rune(v); len(rs) <= room {
			return rs
		}
	}
	if room < 2 {
		return nil
	}
	rs := []rune(variants[len(variants)-1])
	return append(rs[:room-1:room-1], '…')
}

// placed is a note on a row: cells [x, x+len(rs)).
type placed struct {
	x    int
	rs   []rune
	tone tone
	bar  int  // its own bar, -1 for the fabric's notes
	own  bool // it needs a row to itself (it covers another bar)
}

// noteRows lays out notes of one instant, several to a row when they fit
// side by side without hiding another node's bar.
func (l *textLayout) noteRows(group []item) [][]cell {
	var rows [][]placed
	for _, it := range group {
		p := l.placeNote(it)
		done := false
		for i := range rows {
			if p.own || rows[i][0].own {
				continue
			}
			ok := true
			for _, q := range rows[i] {
				if p.x <= q.x+len(q.rs) && q.x <= p.x+len(p.rs) {
					ok = false
				}
			}
			if ok {
				rows[i] = append(rows[i], p)
				done = true
				break
			}
		}
		if !done {
			rows = append(rows, []placed{p})
		}
	}
	out := make([][]cell, len(rows))
	for i, ps := range rows {
		row := l.blank('│')
		for _, p := range ps {
			for j, r := range p.rs {
				row[p.x+j] = cell{r: r, tone: p.tone}
			}
		}
		out[i] = row
	}
	return out
}

// placeNote puts a note beside its node's bar, marked ●: to the right of
// the bar, or to the left for the last column.
func (l *textLayout) placeNote(it item) placed {
	text := []rune(it.text)
	n := len(l.pos)
	var p placed
	switch {
	case it.node < 0:
		first, last := l.pos[0], l.pos[n-1]
		s := append(append([]rune("── "), text...), []rune(" ──")...)
		p = placed{x: max((first+last)/2-len(s)/2, first+1), rs: s, bar: -1, own: true}
	case it.node < n-1 || n == 1:
		p = placed{x: l.pos[it.node], rs: append([]rune("● "), text...), bar: l.pos[it.node]}
	default:
		p = placed{rs: append(text, []rune(" ●")...), bar: l.pos[it.node]}
		p.x = p.bar - len(p.rs) + 1
	}
	p.tone = it.tone
	if p.x < l.timeW+2 {
		p.x = l.timeW + 2
	}
	if room := l.width - p.x; len(p.rs) > room {
		p.rs = append(p.rs[:room-1:room-1], '…')
	}
	for _, b := range l.pos {
		if b != p.bar && b >= p.x-1 && b <= p.x+len(p.rs) {
			p.own = true
		}
	}
	return p
}

// ANSI colours of the tones.
var ansi = [...]string{
	toneNone:  "",
	toneOK:    "\x1b[32m",
	toneErr:   "\x1b[31m",
	toneWarn:  "\x1b[33m",
	toneFault: "\x1b[35m",
	toneRetx:  "\x1b[36m",
	toneDim:   "\x1b[2m",
}

const (
	ansiBold  = "\x1b[1m"
	ansiReset = "\x1b[0m"
)

// writeRow writes the time column and the row, trailing blanks trimmed.
func (l *textLayout) writeRow(w *bufio.Writer, t string, row []cell) {
	rt := []rune(t)
	w.WriteString(strings.Repeat(" ", l.timeW-len(rt)))
	w.WriteString(t)
	end := len(row)
	for end > 0 && row[end-1].r == ' ' {
		end--
	}
	cur := ""
	for x := l.timeW; x < end; x++ {
		c := row[x]
		if l.opt.Color {
			want := ansi[c.tone]
			if c.bold {
				want = ansiBold
			}
			if c.r == ' ' {
				want = cur // spaces need no colour change
			}
			if want != cur {
				if cur != "" {
					w.WriteString(ansiReset)
				}
				w.WriteString(want)
				cur = want
			}
		}
		w.WriteRune(c.r)
	}
	if cur != "" {
		w.WriteString(ansiReset)
	}
	w.WriteByte('\n')
}

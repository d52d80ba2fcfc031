package ladder

import "math"

// Placing the SVG's text so that no two pieces overlap:
//
//  1. Everything fixed is an obstacle first: the node boxes, the time
//     labels, the breaks' captions, the notes' boxes.
//  2. Each loss reason goes beside its ✗; one that would cover text
//     already placed is shortened, else left out (its arrow's tooltip has
//     it).
//  3. Each arrow's label goes along its arrow, above the line: the
//     fullest variant that fits (the terminal's text first, with the
//     sender's notes such as "PSN 2 expected, PSN 3 received"), at the
//     first distance from the sender where it covers nothing placed;
//     failing every variant at every distance, the arrow has no label and
//     its tooltip says it all.
//
// A piece of text is a rectangle, rotated for labels along slanted
// arrows, from the glyphs' estimated extent (0.6 em a character, 0.8 em
// above the baseline, 0.25 em below).

// quad is a rectangle in any orientation: its corners in order.
type quad [4][2]float64

// textQuad is the extent of text of n characters in font size font,
// anchored at (0, baseline) of a frame translated to (px, py) and
// rotated by angle degrees; start: the text runs from the anchor to the
// right, else it ends there.
func textQuad(px, py, angle, baseline float64, n int, font float64, start bool) quad {
	w := float64(n) * font * 0.6
	x0, x1 := 0.0, w
	if !start {
		x0, x1 = -w, 0
	}
	y0, y1 := baseline-0.8*font, baseline+0.25*font
	s, c := math.Sincos(angle * math.Pi / 180)
	var q quad
	for i, p := range [4][2]float64{{x0, y0}, {x1, y0}, {x1, y1}, {x0, y1}} {
		q[i] = [2]float64{px + p[0]*c - p[1]*s, py + p[0]*s + p[1]*c}
	}
	return q
}

// boxQuad is the axis-aligned rectangle from (x, y), w wide, h high.
func boxQuad(x, y, w, h float64) quad {
	return quad{{x, y}, {x + w, y}, {x + w, y + h}, {x, y + h}}
}

// overlaps reports whether a and b share more than a sliver: by the
// separating axis test, with a pixel of tolerance so that pieces that
// merely touch do not count.
func (a quad) overlaps(b quad) bool {
	for _, q := range []quad{a, b} {
		for i := 0; i < 2; i++ {
			ax, ay := q[i+1][0]-q[i][0], q[i+1][1]-q[i][1]
			n := math.Hypot(ax, ay)
			if n == 0 {
				continue
			}
			ax, ay = -ay/n, ax/n
			amin, amax := project(a, ax, ay)
			bmin, bmax := project(b, ax, ay)
			if amax <= bmin+1 || bmax <= amin+1 {
				return false
			}
		}
	}
	return true
}

// project returns the extent of q along the axis (ax, ay).
func project(q quad, ax, ay float64) (lo, hi float64) {
	lo, hi = math.Inf(1), math.Inf(-1)
	for _, p := range q {
		d := p[0]*ax + p[1]*ay
		lo, hi = min(lo, d), max(hi, d)
	}
	return lo, hi
}

// placedText is the text of an SVG drawing placed so far.
type placedText []quad

// free reports whether q covers nothing placed.
func (p placedText) free(q quad) bool {
	for _, o := range p {
		if q.overlaps(o) {
			return false
		}
	}
	return true
}
